"""The seed plan on hand-made records whose answers are worked out by hand: per pair the seeds for
80% power, per task the largest need up to the cap."""

from pebench.analysis.frames import frames
from pebench.analysis.seed_plan import render_plan, seed_plan
from tests.hand_records import record, typed


def test_the_seed_plan_takes_each_tasks_largest_need_up_to_ten():
    # sort: nope - t5 per seed 0, 0.1, 0.2 (mean / s = 1: 10 seeds at 80% power, Cohen's tables),
    # nope - alibi 0.3, 0.35, 0.4 (mean / s = 7: 3 seeds; at 2, one degree of freedom, t must pass 12.7); rope and sinusoidal not learned. Plan:
    # 10 seeds of nope, t5, alibi: 30 runs, 9 of them there.
    values = {"nope": [0.6, 0.6, 0.6], "t5": [0.6, 0.5, 0.4], "alibi": [0.3, 0.25, 0.2]}
    records = [record("sort", encoding, seed, 0.5, ood_metric=scores[seed]) for encoding, scores in values.items() for seed in range(3)]
    pairs, tasks = seed_plan(frames(typed(records)))
    assert pairs["seeds for 80% power"].tolist() == [10, 3]
    assert tasks.to_dict("records")[0] | {"hours": None} == {"task": "sort", "seeds planned": 10, "encodings": "alibi,nope,t5", "runs to add": 21, "hours": None}
    # nope - t5 at 0, 0.05, 0.15 (mean / s = 0.87: 13 seeds) needs more than 10: the plan keeps 3.
    records = [record("sort", encoding, seed, 0.5, ood_metric=scores[seed]) for encoding, scores in {"nope": [0.6] * 3, "t5": [0.6, 0.55, 0.45]}.items()
               for seed in range(3)]
    pairs, tasks = seed_plan(frames(typed(records)))
    assert pairs["seeds for 80% power"].tolist() == [13] and tasks["seeds planned"].tolist() == [3] and tasks["runs to add"].tolist() == [0]
    assert "13 (judged by equivalence at the task's seeds)" in render_plan(frames(typed(records)))
