import json

import pytest

from pebench.records import record_path, write_record


def test_non_finite_values_are_stored_as_json(tmp_path):
    path = tmp_path / "runs" / "t" / "e" / "seed0.json"
    write_record(path, {"final_loss": float("nan"), "buckets": [[97, float("inf")]]})
    assert json.loads(path.read_text()) == {"final_loss": None, "buckets": [[97, "inf"]]}


def test_an_unwritable_record_leaves_no_file(tmp_path):
    path = tmp_path / "seed0.json"
    with pytest.raises(TypeError):
        write_record(path, {"model": object()})
    assert list(tmp_path.iterdir()) == []


def test_overridden_runs_get_their_own_file(tmp_path):
    plain = record_path(tmp_path, "copy", "rope", 0, [])
    overridden = record_path(tmp_path, "copy", "rope", 0, ["training.steps=5"])
    assert plain.name == "seed0.json" and overridden.name.startswith("seed0-") and overridden != plain
    assert overridden == record_path(tmp_path, "copy", "rope", 0, ["training.steps = 5"])
