"""A researcher's encoding against baseline records (pebench report --baseline), and rows that never
pool two versions of a plugin: hand-made records whose differences are worked out by hand."""

import json

import pytest
from tests.hand_records import record, typed
from tests.pebench_command import pebench_here

from pebench.analysis.comparison import paired_differences, pool
from pebench.analysis.frames import frames
from pebench.analysis.tables import provenance

MINE = [0.50, 0.60, 0.70]  # the new encoding's OOD sequence accuracy at seeds 0, 1, 2
NOPE = [0.30, 0.35, 0.45]  # the baseline's: differences 0.20, 0.25, 0.25
ROPE = [0.50, 0.62, 0.69]  # differences 0.00, -0.02, 0.01: neither a difference nor, at 3 seeds, equivalence within 0.02


def baseline_records():
    return [record("t1", "nope", s, NOPE[s]) for s in range(3)] + [record("t1", "rope", s, ROPE[s]) for s in range(3)]


def user_records():
    return [record("t1", "mine", s, MINE[s]) for s in range(3)]


def test_the_paired_difference_against_each_baseline_is_the_hand_computed_one():
    pooled = pool(typed(user_records()), typed(baseline_records()))
    assert pooled.candidates == ["mine"] and not pooled.left_out
    rows = paired_differences(frames(pooled.records), pooled.candidates).set_index("baseline")
    # mean 0.7/3 = 0.23333; sd of (0.20, 0.25, 0.25) = 0.028868; t = 0.23333 / (0.028868 / sqrt 3) = 14.0;
    # at 2 degrees of freedom p = 1 - t / sqrt(2 + t^2) = 0.00506 < 0.05 / 2 (Holm, 2 pairs): holds.
    # Interval: t(0.975, 2) = 0.95 / sqrt(2 * 0.975 * 0.025) = 4.302653; half-width 4.302653 * 0.016667 = 0.071711.
    nope = rows.loc["nope"]
    assert nope.seeds == 3 and nope.difference == pytest.approx(0.233333, abs=1e-6)
    assert (nope.low, nope.high) == (pytest.approx(0.161622, abs=1e-5), pytest.approx(0.305044, abs=1e-5))
    assert nope.outcome == "holds" and nope.means == "0.600 vs 0.367"
    # Against rope: differences 0.00, -0.02, 0.01, mean -0.00333, sd 0.015275: neither different
    # (p = 0.74) nor, at 3 seeds, within ±0.02 for sure (TOST p = 0.10): unresolved.
    rope = rows.loc["rope"]
    assert rope.difference == pytest.approx(-0.003333, abs=1e-6) and rope.outcome == "unresolved"


def test_a_baseline_at_another_task_card_is_left_out_and_the_users_own_runs_win():
    other = record("t1", "alibi", 0, 0.9)
    other["training"]["steps"] = 5000  # another budget: another card, not comparable
    other["task"]["training"] = {"steps": 5000}
    mine_of_nope = record("t1", "nope", 0, 0.99)  # the user ran a baseline encoding too: theirs is used
    pooled = pool(typed([*user_records(), mine_of_nope]), typed([*baseline_records(), other]))
    assert pooled.left_out == {"t1": 1}
    nope_seed0 = [r for r in pooled.records if r.encoding["name"] == "nope" and r.seed == 0]
    assert nope_seed0 == typed([mine_of_nope])


def test_a_row_never_pools_two_versions_of_a_plugin_and_the_table_names_both():
    records = user_records()
    for r, (version, source) in zip(records, [("0.1.0", "aaaa"), ("0.1.0", "aaaa"), ("0.1.1", "bbbb")]):
        r["plugin"] = {"distribution": "my-plugin", "version": version, "source": source * 4, "revision": 1}
        r["git_commit"] = "0123456789abcdef"
    runs = frames(typed(records)).runs
    assert sorted(runs.encoding.unique()) == ["mine [0.1.0+aaaaaaaa]", "mine [0.1.1+bbbbbbbb]"]
    line = provenance(runs)
    assert line.startswith("records: 3 runs from 1 pebench commit (0123456: 3)")
    assert "my-plugin 0.1.0+aaaaaaaa (mine [0.1.0+aaaaaaaa])" in line and "my-plugin 0.1.1+bbbbbbbb (mine [0.1.1+bbbbbbbb])" in line


def write(folder, records):
    for r in records:
        path = folder / "runs" / r["task"]["name"] / r["encoding"]["name"] / f"seed{r['seed']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def snapshot(folder):
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def test_report_with_a_baseline_writes_the_comparison_and_nothing_into_the_baseline(tmp_path, capsys):
    base, mine = tmp_path / "base", tmp_path / "mine"
    write(base, baseline_records())
    write(mine, user_records())
    before = snapshot(base)
    out = pebench_here(capsys, "report", "--results", str(mine), "--baseline", str(base))
    assert out.returncode == 0, out.stderr
    assert snapshot(base) == before
    comparison = (mine / "leaderboards" / "comparison.md").read_text()
    assert "| t1     | mine       | nope       | sequence_accuracy | 3       | 0.600 vs 0.367 | +0.233       | [+0.162, +0.305] | holds      |" in comparison
    assert "| mine       | 2 of 3  | 0.500 (0.500-1.000) | t1      |" in comparison  # rope 0.603 first, mine 0.600, nope 0.367
    assert "comparison.md" in out.stdout
    board = (mine / "leaderboards" / "t1.md").read_text()
    assert "nope" in board and "rope" in board and "mine" in board  # the baselines beside yours, in your folder
    same = pebench_here(capsys, "report", "--results", str(mine), "--baseline", str(mine))
    assert same.returncode == 2 and "is the results folder itself" in same.stderr
    # --encodings keeps a subset of the pooled records: the board shows mine and nope alone
    subset = pebench_here(capsys, "report", "--results", str(mine), "--baseline", str(base), "--encodings", "mine,nope")
    assert subset.returncode == 0, subset.stderr
    board = (mine / "leaderboards" / "t1.md").read_text()
    assert "mine" in board and "nope" in board and "rope" not in board
    unknown = pebench_here(capsys, "report", "--results", str(mine), "--encodings", "nosuch")
    assert unknown.returncode == 2 and "--encodings nosuch: no run of nosuch; the records have mine" in unknown.stderr


def test_an_edited_or_bumped_plugin_makes_its_records_stale():
    from pebench.core.registry import same_code

    now = {"distribution": "my-plugin", "version": "0.1.1", "source": "b" * 16, "revision": 1}
    assert same_code(dict(now), now)
    assert not same_code({**now, "source": "a" * 16}, now)  # the code edited, the version not
    assert not same_code({**now, "version": "0.1.0"}, now)  # the version bumped
    assert not same_code(None, now)  # a record from before these fields: stale for another distribution's plugin
    own = {"distribution": "pebench", "version": "0.1.0", "source": "c" * 16, "revision": 2}
    assert same_code({**own, "source": "d" * 16}, own) and not same_code({**own, "revision": 1}, own)
