"""Saved weights and `pebench evaluate`: a saved model scored again reproduces its run's scores,
scores new lengths without training, and refuses what would change the model."""

import json

import pytest

from tests.pebench_command import TINY, pebench, pebench_here


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    out = pebench("run", "--encoding", "rope", "--task", "copy", "--results", str(results), *TINY, "--save-checkpoint")
    assert out.returncode == 0, out.stderr
    [path] = (results / "runs" / "copy" / "rope").glob("*.json")
    return results, path


def test_a_saved_model_scored_again_gives_its_runs_scores_and_scores_new_lengths(trained, tmp_path):
    results, path = trained
    source = json.loads(path.read_text())
    assert (results / source["checkpoint"]).is_file() and source["checkpoint"].startswith("checkpoints/copy/rope/seed0-")
    out = pebench("evaluate", str(path), "--set", "split.buckets=[[1, 16], [17, 32], [65, 128]]", "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "without training" in out.stdout and "65-128" in out.stdout
    [new_path] = (tmp_path / "runs" / "copy" / "rope").glob("*.json")
    record = json.loads(new_path.read_text())
    assert record["evaluated_from"]["checkpoint"] == source["checkpoint"] and record["training"] == source["training"]
    assert record["settings"]["split.buckets"] == [[1, 16], [17, 32], [65, 128]]
    # the same weights on the same (seeded) examples: the run's own scores, bucket for bucket
    assert [b["metrics"] for b in record["buckets"][:2]] == [b["metrics"] for b in source["buckets"][:2]]
    assert record["buckets"][2]["bucket"] == "65-128" and record["buckets"][2]["lengths"][0]["length"] == 65


@pytest.mark.parametrize("override, message", [
    ("training.steps=5", "--set training.steps would change the trained model"),
    ("encoding.base=500", "--set encoding.base would change the trained model"),
])
def test_settings_that_change_the_model_are_refused(trained, tmp_path, capsys, override, message):
    _, path = trained
    out = pebench_here(capsys, "evaluate", str(path), "--set", override, "--results", str(tmp_path))
    assert out.returncode == 2 and message in out.stderr


def test_a_run_without_a_checkpoint_says_how_to_get_one(tmp_path):
    out = pebench("run", "--encoding", "nope", "--task", "copy", "--results", str(tmp_path), *TINY)
    [path] = (tmp_path / "runs" / "copy" / "nope").glob("*.json")
    out = pebench("evaluate", str(path), "--set", "split.eval_examples=4", "--results", str(tmp_path))
    assert out.returncode == 2 and "--save-checkpoint" in out.stderr
