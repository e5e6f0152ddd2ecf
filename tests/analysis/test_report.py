"""Leaderboards from hand-made records whose tables are worked out by hand: intervals, the ID
rule, mean reciprocal rank and its bootstrap interval, tables kept apart by their settings, and
reports written all or nothing."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pebench.analysis import leaderboards

from pebench.analysis import report
from pebench.analysis import tables as rendering
from pebench.records.paths import settings_hash
from pebench.analysis.leaderboards import extrapolation_length, leaderboard, overall
from pebench.analysis.report import write_reports
from pebench.analysis.statistics import interval
from pebench.analysis.frames import frames
from pebench.analysis.tables import display
from tests.hand_records import record, typed


def test_interval_is_the_students_t_half_width():
    # t(0.975, 2) = 4.302653 (tables); s = 0.1; 4.302653 * 0.1 / sqrt(3) = 0.248414
    assert interval([0.1, 0.2, 0.3]) == pytest.approx(0.248414, abs=1e-6)
    assert math.isnan(interval([0.5]))


def toy_grid():
    # t1: A's runs 0.9, 0.1, 0.1 (mean 0.367) against B's 0.5 (each run); C never learns ID.
    # t2: A 0.8 > C 0.5 > B 0.2 in every run.
    records = []
    for seed in range(3):
        records += [record("t1", "A", seed, [0.9, 0.1, 0.1][seed]), record("t1", "B", seed, 0.5), record("t1", "C", seed, 0.99, learned=False),
                    record("t2", "A", seed, 0.8), record("t2", "B", seed, 0.2), record("t2", "C", seed, 0.5)]
    return records


def test_runs_that_did_not_learn_id_are_shown_marked_and_not_ranked():
    table = frames(typed(toy_grid()))
    board = leaderboard(table, table.runs[table.runs.task == "t1"], "sequence_accuracy").set_index("encoding")
    assert board.loc["B", "rank"] == 1 and board.loc["A", "rank"] == 2 and math.isnan(board.loc["C", "rank"])
    assert board.loc["C", "learned"] == 0 and not board.loc["C", "ranked"]
    assert math.isnan(board.loc["C", "OOD mean"])  # no run learned ID: no OOD score shown
    assert board.loc["A", "OOD mean"] == pytest.approx(1.1 / 3) and board.loc["A", "steps"] == 200  # median of 100, 200, 300
    assert list(board.index) == ["B", "A", "C"]


def test_mean_reciprocal_rank_and_its_bootstrap_interval_known_answers():
    # Point: t1 ranks B 1, A 2 (C unranked: 0); t2 ranks A 1, C 2, B 3.
    #   MRR A = (1/2 + 1) / 2 = 0.75, B = (1 + 1/3) / 2 = 0.667, C = (0 + 1/2) / 2 = 0.25.
    # Bootstrap: only t1's A varies: A's resampled mean beats 0.5 when two or three of its three
    # draws are the 0.9 run (p = 7/27), so A's MRR is 0.75 or 1 (interval 0.75-1) and B's is
    # 0.667 or (1/2 + 1/3) / 2 = 0.417 (interval 0.417-0.667); C's is 0.25 in every resample.
    result = overall(frames(typed(toy_grid()))).set_index("encoding")
    assert result["MRR"].to_dict() == pytest.approx({"A": 0.75, "B": 2 / 3, "C": 0.25})
    assert (result.loc["A", "MRR low"], result.loc["A", "MRR high"]) == pytest.approx((0.75, 1.0))
    assert (result.loc["B", "MRR low"], result.loc["B", "MRR high"]) == pytest.approx((5 / 12, 2 / 3))
    assert (result.loc["C", "MRR low"], result.loc["C", "MRR high"]) == pytest.approx((0.25, 0.25))
    assert result.loc["C", "tasks ranked"] == 1 and result.loc["C", "tasks run"] == 2
    assert list(result.index) == ["A", "B", "C"]


def test_the_bootstrap_resamples_seeds_paired_across_encodings():
    # Seed 0 is easy, seed 1 hard, for both: A 0.9, 0.3; B 0.8, 0.2. Whatever seeds a resample
    # draws, A's mean is B's + 0.1, so A ranks first in every resample: intervals 1-1 and 0.5-0.5.
    # Resampling each encoding's runs on its own, A would lose in 5/16 of the resamples (A 0.6
    # against B 0.8, or A 0.3 against B 0.8 or 0.5) and both intervals would widen to 0.5-1.
    records = [record("t", "A", seed, [0.9, 0.3][seed]) for seed in range(2)] + [record("t", "B", seed, [0.8, 0.2][seed]) for seed in range(2)]
    result = overall(frames(typed(records))).set_index("encoding")
    assert result[["MRR", "MRR low", "MRR high"]].to_dict("index") == {"A": {"MRR": 1.0, "MRR low": 1.0, "MRR high": 1.0},
                                                                      "B": {"MRR": 0.5, "MRR low": 0.5, "MRR high": 0.5}}


def test_an_overall_ranking_of_encodings_at_different_seeds_is_refused():
    records = [record("t", "A", seed, 0.1) for seed in range(3)] + [record("t", "B", 0, 0.9)]
    with pytest.raises(ValueError, match=r"overall ranking of t: B did not run every seed of \[0, 1, 2\]"):
        overall(frames(typed(records)))


def test_the_overall_ranking_comes_in_blocks_of_encodings_that_ran_the_same_tasks(tmp_path):
    # D ran t2 only. Block 1: A, B, C over t1 and t2, as without D (C not ranked on t1: "—").
    # Block 2: A, B, C, D over t2 alone: A 0.8 > D 0.6 > C 0.5 > B 0.2, MRR 1, 1/2, 1/3, 1/4.
    records = toy_grid() + [record("t2", "D", seed, 0.6) for seed in range(3)]
    first, second = leaderboards.overall_groups(frames(typed(records)))
    assert first.ranking.equals(overall(frames(typed(toy_grid())))) and first.tasks == ["t1", "t2"] and len(first.cells) == 6
    assert rendering.display_overall(first.ranking).set_index("encoding").loc["C", "t1"] == "—"
    assert second.tasks == ["t2"] and list(second.ranking.columns[6:]) == ["t2"]
    assert second.ranking.set_index("encoding")["MRR"].to_dict() == pytest.approx({"A": 1, "D": 1 / 2, "C": 1 / 3, "B": 1 / 4})
    write_reports(typed(records), tmp_path)
    shown = (tmp_path / "overall.md").read_text()
    assert "3 encodings x 2 tasks (t1, t2), the same 6 runs each (task, seed):" in shown
    assert "4 encodings x 1 task (t2), the same 3 runs each (task, seed):" in shown
    assert shown.index("3 encodings") < shown.index("4 encodings")  # 6 (encoding, task) cells before 4
    csv = (tmp_path / "overall.csv").read_text().splitlines()
    assert csv[0] == "block,runs each,tasks,encoding,MRR,MRR low,MRR high,tasks ranked,tasks run,t1,t2"
    assert csv[1:4] == ["1,6,t1;t2,A,0.75,0.75,1,2,2,2,1", "1,6,t1;t2,B,0.666667,0.416667,0.666667,2,2,1,3",
                        "1,6,t1;t2,C,0.25,0.25,0.25,1,2,not ranked,2"]
    assert csv[4] == "2,3,t2,A,1,1,1,1,1,,1" and len(csv) == 1 + 3 + 4  # t1 is not in block 2: empty


def test_a_block_holds_only_the_seeds_its_encodings_all_ran():
    # A ran t at seeds 0-2 (0.9, 0.1, 0.1), B at seeds 0-1 (0.5). Over seeds 0 and 1, A's mean is
    # 0.5: a tie with B (MRR 2/3 each). Counting A's seed 2 would give A 0.367 < B.
    records = [record("t", "A", seed, [0.9, 0.1, 0.1][seed]) for seed in range(3)] + [record("t", "B", seed, 0.5) for seed in range(2)]
    [block] = leaderboards.overall_groups(frames(typed(records)))
    assert block.cells == frozenset({("t", 0), ("t", 1)})
    assert block.ranking.set_index("encoding")["MRR"].to_dict() == pytest.approx({"A": 2 / 3, "B": 2 / 3})


def test_blocks_are_every_set_of_tasks_two_encodings_or_more_share():
    # A ran t1-t3, B t1, t2, t4, C t1: blocks {A, B} x {t1, t2} (4 cells) and {A, B, C} x {t1} (3);
    # no encoding ran exactly {t1, t2}, and the comparison of A and B on it is not lost.
    records = ([record(t, "A", 0, 0.5) for t in ("t1", "t2", "t3")] + [record(t, "B", 0, 0.4) for t in ("t1", "t2", "t4")]
               + [record("t1", "C", 0, 0.3)])
    blocks = leaderboards.overall_groups(frames(typed(records)))
    assert [(sorted(b.ranking.encoding), b.tasks) for b in blocks] == [(["A", "B"], ["t1", "t2"]), (["A", "B", "C"], ["t1"])]


def test_encodings_with_no_common_run_make_no_block_and_the_table_says_so(tmp_path):
    records = [record("t1", "A", 0, 0.5), record("t2", "B", 0, 0.4)]
    assert leaderboards.overall_groups(frames(typed(records))) == []
    write_reports(typed(records), tmp_path)
    assert "No two encodings have runs at a common task and seed yet." in (tmp_path / "overall.md").read_text()
    records.append(record("t1", "C", 0, 0.3))
    write_reports(typed(records), tmp_path)
    assert "In no table (no other encoding ran any of their tasks at the same seed): B" in (tmp_path / "overall.md").read_text()


def test_a_run_with_other_buckets_is_its_own_table_and_blanks_nothing(tmp_path):
    records = toy_grid() + [record("t1", "A", 0, 0.0, settings={"split.buckets": [[1, 4], [5, 6], [7, 8]]})]
    printed = write_reports(typed(records), tmp_path / "boards")
    assert "t1" in printed and "t1@" + report_label(records[-1]) in printed
    assert overall(frames(typed(toy_grid()))).equals(overall(frames(typed(records))))  # the overall ranks ignore the other table
    legend = (tmp_path / "boards" / "legend.md").read_text()
    assert "split.buckets=[[1, 4], [5, 6], [7, 8]]" in legend


def report_label(record):
    return settings_hash(record["settings"])


def test_reports_are_written_all_or_nothing(tmp_path, monkeypatch):
    out = tmp_path / "boards"
    write_reports(typed(toy_grid()), out)
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def broken_plot(name, *args):
        if name == "t2":
            raise RuntimeError("disk full")
        return real_plot(name, *args)

    real_plot = report.plot
    monkeypatch.setattr(report, "plot", broken_plot)
    with pytest.raises(RuntimeError, match="disk full"):
        write_reports(typed([r for r in toy_grid() if r["encoding"]["name"] != "C"]), out)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # t1's new files did not land
    assert [p.name for p in tmp_path.iterdir()] == ["boards"]  # no staging folder left behind


def test_load_results_gives_one_row_per_run_and_length_with_the_runs_metadata(tmp_path):
    import json

    import pebench

    for record_ in toy_grid()[:3]:  # t1: A, B, C at seed 0
        path = tmp_path / "runs" / record_["task"]["name"] / record_["encoding"]["name"] / f"seed{record_['seed']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**record_, "git_commit": "abc", "data": {}}))
    frame = pebench.load_results(tmp_path)
    assert len(frame) == 3 * 8  # 3 runs x lengths 1..8
    row = frame[(frame.encoding == "A") & (frame.length == 6)].iloc[0]
    assert row.sequence_accuracy == 0.9 and row.bucket == "5-8" and row.learned and row.steps_to_target == 100
    assert {"final_loss", "wall_seconds", "git_commit", "threads", "device", "data_origin", "protocol", "seed", "n"} <= set(frame.columns)
    assert row.git_commit == "abc" and row.protocol == 2 and row.data_origin == "generated"


def test_a_run_without_an_ood_score_is_left_out_of_the_mean_not_counted_as_zero():
    # X: 0.5, (no OOD score: a bucket its encoding could not represent), 0.5 -> 0.5, above Y's 0.4;
    # read as 0, X would fall to 0.333 and below Y.
    records = []
    for seed in range(3):
        x = record("t", "X", seed, 0.5)
        if seed == 1:
            x["scores"]["OOD"] = None
        records += [x, record("t", "Y", seed, 0.4)]
    table = frames(typed(records))
    assert overall(table).set_index("encoding")["MRR"].to_dict() == pytest.approx({"X": 1.0, "Y": 0.5})
    board = leaderboard(table, table.runs, "sequence_accuracy").set_index("encoding")
    assert board.loc["X", "OOD mean"] == pytest.approx(0.5) and board.loc["X", "rank"] == 1


def test_run_times_sum_each_records_stages_per_task():
    # t1: A at seeds 0-2 took 300 s each (data 60, training 180, evaluation 60), B at seed 0 120 s:
    # 17 min; t2: A at seed 0 20 min and C, a record without stages: counted as a run, untimed.
    # Other settings (t1@...) and protocol 1 records are not the grid's: left out.
    def timed(task, encoding, seed, seconds, **kwargs):
        made = record(task, encoding, seed, 0.5, **kwargs)
        return {**made, "stages": {"data_seconds": seconds / 5, "train_seconds": seconds * 3 / 5, "eval_seconds": seconds / 5},
                "training": {**made["training"], "wall_seconds": seconds * 3 / 5}}  # 100 steps

    protocol1 = {**timed("t2", "A", 1, 6000), "protocol": 1}
    records = ([timed("t1", "A", seed, 300) for seed in range(3)] + [timed("t1", "B", 0, 120), timed("t2", "A", 0, 1200), record("t2", "C", 0, 0.5),
               timed("t1", "A", 0, 9999, settings={"training.steps": 7}), protocol1])
    times = leaderboards.run_times(frames(typed(records))).set_index("task")
    assert list(times.index) == ["t2", "t1", "all"]  # most hours first
    assert times.loc["t1", ["runs", "encodings", "seeds"]].tolist() == [4, 2, "0, 1, 2"]
    assert times.loc["t1", ["hours", "minutes per run", "fastest", "slowest"]].tolist() == pytest.approx([17 / 60, 17 / 4, 2, 5])
    # Training 180 s per 100 steps (A, three runs) and 72 s (B): the median of 1800, 1800, 1800, 720 s per 1,000 steps.
    assert times.loc["t1", "train s / 1k steps"] == pytest.approx(1800)
    assert times.loc["t2", ["runs", "untimed", "hours", "fastest", "slowest"]].tolist() == pytest.approx([2, 1, 1 / 3, 20, 20])
    assert times.loc["all", ["runs", "untimed", "encodings", "hours"]].tolist() == pytest.approx([6, 1, 3, 37 / 60])
    assert "untimed" in rendering.render_run_times(frames(typed(records)))
    assert "untimed" not in rendering.render_run_times(frames(typed(records[:5])))  # every run timed: no such column


def test_the_suite_matrix_shows_each_tasks_ood_score_bolds_the_best_and_marks_the_unlearned():
    # toy_grid: t1: B 0.5 > A (0.9 + 0.1 + 0.1) / 3 = 0.367; C never learns ID (ID 0.5): shown,
    # not ranked. t2: A 0.8 > C 0.5 > B 0.2. A task of the levels with no runs (t3) is left out.
    scores = leaderboards.suite_scores(frames(typed(toy_grid())), {"regular": ("t3", "t1"), "cs": ("t2",)})
    assert scores.groupby("task").size().to_dict() == {"t1": 3, "t2": 3}
    lines = rendering.render_suite(scores, "T").splitlines()
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:] if not line.startswith("|--")]
    assert lines[0] == "T" and cells == [["level", "task", "A", "B", "C"], ["regular", "t1", "0.367", "**0.500**", "— (0.50)"],
                                         ["cs", "t2", "**0.800**", "0.200", "0.500"]]


def test_extrapolation_length_on_hand_made_curves():
    # L = 10. A dip and a recovery: 0.97 at 10, 0.96 at 11, 0.90 at 12, then 0.99 and 1.0: at
    # τ = 0.95 the reach stops before the dip (11 / 10), the recovery does not count; at τ = 0.5
    # it is never below, so the last length (14 / 10). Length 9 is a training length, not looked at.
    dip = pd.Series([0.1, 0.97, 0.96, 0.90, 0.99, 1.0], index=[9, 10, 11, 12, 13, 14])
    assert extrapolation_length(dip, 10, 0.95) == pytest.approx(1.1) and extrapolation_length(dip, 10, 0.5) == pytest.approx(1.4)
    assert extrapolation_length(pd.Series([0.4, 0.3], index=[10, 20]), 10, 0.5) == 0.0  # never at τ, not even at L
    assert extrapolation_length(pd.Series([0.99, 0.99, 0.99], index=[10, 20, 30]), 10, 0.95) == 3.0  # up to the last length
    assert extrapolation_length(pd.Series([0.99, np.nan, 0.99], index=[10, 20, 30]), 10, 0.95) == 1.0  # a length not scored stops it
    assert math.isnan(extrapolation_length(pd.Series([1.0], index=[5]), 10, 0.95))  # nothing evaluated from L on
    with pytest.raises(ValueError, match="infinite"):
        extrapolation_length(pd.Series([1.0, np.inf], index=[10, 11]), 10, 0.95)


def test_the_task_table_shows_the_extrapolation_length_and_the_chomsky_best_of_seeds():
    # record(): training lengths 1-4, exact match 1.0 at 1-4 and the OOD value at 5-8. A: 0.96
    # (reach 8 / 4 at both τ); B: 0.6 at seed 0 (4 / 4 at 0.95, 8 / 4 at 0.5) and 0.96 at seed 1.
    records = [record("copy", "A", 0, 0.5, ood_metric=0.96), record("copy", "B", 0, 0.5, ood_metric=0.6), record("copy", "B", 1, 0.5, ood_metric=0.96)]
    table = frames(typed(records))
    board = leaderboard(table, table.runs, "sequence_accuracy").set_index("encoding")
    assert board.loc["A", "ℓ*/L (exact_match ≥ 0.95) mean"] == 2.0 and board.loc["B", "ℓ*/L (exact_match ≥ 0.95) mean"] == 1.5
    assert board.loc["B", "ℓ*/L (exact_match ≥ 0.5) mean"] == 2.0 and "OOD best of seeds" not in board  # copy is not a Chomsky task
    assert "ℓ*/L (exact_match ≥ 0.95)" in display(board.reset_index()).columns
    # parity_check, a Chomsky task: the best OOD score of any run, learned ID or not (0.7 of a run that did not).
    chomsky = frames(typed([record("parity_check", "A", 0, 0.3), record("parity_check", "A", 1, 0.7, learned=False)]))
    board = leaderboard(chomsky, chomsky.runs, "sequence_accuracy")
    assert board.loc[0, "OOD best of seeds"] == 0.7 and board.loc[0, "OOD mean"] == 0.3
    assert display(board)["OOD best of seeds (Delétang/Ruoss statistic, not ranked)"].tolist() == ["0.700"]


def test_a_run_of_an_earlier_card_of_its_task_is_its_own_table_never_ranked(tmp_path):
    # t1's card capped training at 7 steps when C ran, and no more when A and B ran, later: C's
    # run is t1@<hash of {"training.steps": 7}>, the legend says so, no ranking uses it.
    from pebench.analysis.leaderboards import ranked_runs

    current = [{**record("t1", name, 0, 0.5), "created": "2026-12-05T10:00:00+00:00"} for name in "AB"]
    earlier = record("t1", "C", 0, 0.9)
    earlier = {**earlier, "created": "2026-12-01T10:00:00+00:00", "task": {**earlier["task"], "training": {"steps": 7}}}
    table = frames(typed([*current, earlier]))
    assert dict(zip(table.runs.encoding, table.runs.table)) == {"A": "t1", "B": "t1", "C": "t1@" + settings_hash({"training.steps": 7})}
    assert set(ranked_runs(table).encoding) == {"A", "B"}
    write_reports(typed([*current, earlier]), tmp_path)
    assert "training.steps=7" in (tmp_path / "legend.md").read_text()
    assert frames(typed([earlier])).runs.table.tolist() == ["t1"]  # alone, its card is the current one


def test_overrides_are_read_against_the_current_card_too():
    # t1's card caps training at 10 steps now, at 7 when D and F ran. D and E both ran with --set
    # training.lr=0.5: two tables. F ran the earlier card with --set training.steps=10, the
    # current card's value: F joins the current card's table.
    def at(name, created, training, settings):
        base = record("t1", name, 0, 0.5, settings=settings)
        return {**base, "created": created, "task": {**base["task"], "training": training}}

    records = [at("A", "2026-12-05", {"steps": 10}, {}), at("D", "2026-12-01", {"steps": 7, "lr": 0.5}, {"training.lr": 0.5}),
               at("E", "2026-12-05", {"steps": 10, "lr": 0.5}, {"training.lr": 0.5}), at("F", "2026-12-01", {"steps": 10}, {"training.steps": 10})]
    table = frames(typed(records))
    assert dict(zip(table.runs.encoding, table.runs.table)) == {
        "A": "t1", "D": "t1@" + settings_hash({"training.lr": 0.5, "training.steps": 7}), "E": "t1@" + settings_hash({"training.lr": 0.5}), "F": "t1"}


def test_blocks_of_as_many_encodings_on_the_same_tasks_come_in_one_order_whatever_the_hashing():
    # A and B ran t at seeds 0-1, C and D at seeds 0 and 2: blocks {A, B, C, D} x seed 0, then
    # {A, B} x seeds 0-1 and {C, D} x seeds 0 and 2, tied on encodings and tasks, by their cells.
    # The blocks are found through sets, whose order changes with PYTHONHASHSEED; the report's
    # order must not (the committed leaderboards are compared byte for byte).
    script = """
import json
from tests.hand_records import record, typed
from pebench.analysis import leaderboards
from pebench.analysis.frames import frames
records = [record("t", e, s, 0.5) for e, seeds in (("A", (0, 1)), ("B", (0, 1)), ("C", (0, 2)), ("D", (0, 2))) for s in seeds]
blocks = leaderboards.overall_groups(frames(typed(records)))
print(json.dumps([[sorted(b.ranking.encoding), sorted(s for _, s in b.cells)] for b in blocks]))
"""
    orders = {subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parents[2], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                             capture_output=True, text=True, check=True).stdout for seed in range(4)}
    assert [json.loads(order) for order in orders] == [[[["A", "B", "C", "D"], [0]], [["A", "B"], [0, 1]], [["C", "D"], [0, 2]]]]
