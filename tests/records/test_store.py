import json
import os
import pickle
from pathlib import Path

import pytest

from pebench.running.execution import plan
from pebench.records.store import record_problem, write_atomically, write_record
from pebench.records.types import ABSENT, RunRecord, SplitScores, to_json


def test_non_finite_values_are_stored_as_json(tmp_path):
    path = tmp_path / "runs" / "t" / "e" / "seed0.json"
    record = RunRecord(schema=2, task={"split": {"buckets": [[97, float("inf")]]}}, encoding={}, seed=0, status="failed", error={"loss": float("nan")})
    write_record(path, record)
    written = json.loads(path.read_text())
    assert written["task"] == {"split": {"buckets": [[97, "inf"]]}} and written["error"] == {"loss": None}


def test_an_unwritable_record_leaves_no_file(tmp_path):
    path = tmp_path / "seed0.json"
    with pytest.raises(TypeError):
        write_record(path, RunRecord(schema=2, task={}, encoding={}, seed=0, status="failed", model={"x": object()}))
    assert list(tmp_path.iterdir()) == []


def test_a_whole_set_score_of_null_stays_null_and_one_never_made_stays_absent():
    # A text task whose bucket was not scored keeps "all": null; other kinds have no "all" at all.
    text = {"unscored": ["97+"], "ID": {"bleu": 3.1}, "OOD": None, "all": None}
    other = {"unscored": [], "ID": {"exact_match": 1.0}, "OOD": {"exact_match": 0.5}}
    assert to_json(SplitScores.from_json(text)) == text and to_json(SplitScores.from_json(other)) == other
    assert pickle.loads(pickle.dumps(SplitScores.from_json(other))).all is ABSENT  # a worker's record, unpickled


def test_every_committed_record_reads_back_into_the_same_json():
    # The typed record (schema 2, and the fields older records lack left out) is the file's.
    paths = sorted((Path(__file__).parents[2] / "results" / "runs").rglob("*.json"))
    assert len(paths) > 400
    for path in paths:
        data = json.loads(path.read_text())
        assert RunRecord.from_json(data).to_json() == data, path


def test_the_training_time_split_and_padding_share_are_optional_and_checked():
    # Committed records predate them: they read as None, and stay valid; a record with them
    # keeps them through the JSON, and a share outside [0, 1] or a negative time is refused.
    path = sorted((Path(__file__).parents[2] / "results" / "runs").rglob("*.json"))[0]
    old = json.loads(path.read_text())
    training = RunRecord.from_json(old).training
    assert (training.step_seconds, training.batch_seconds, training.padding_share) == (None, None, None)
    assert record_problem(old) is None
    new = {**old, "training": {**old["training"], "step_seconds": 9.8, "batch_seconds": 0.4, "padding_share": 0.4427}}
    assert record_problem(new) is None and RunRecord.from_json(new).to_json() == new
    assert RunRecord.from_json(new).training.padding_share == 0.4427
    for field, bad in (("padding_share", 1.5), ("padding_share", -0.1), ("step_seconds", -1.0), ("batch_seconds", "0.4")):
        assert "not a valid record at training/" + field in record_problem({**new, "training": {**new["training"], field: bad}})


def test_a_configuration_is_its_settings_however_spelled(tmp_path):
    plain = plan("copy", "rope", 0, [], tmp_path).path
    assert plain.name == "seed0.json"
    spellings = [["training.steps=7"], ["training.steps=5", "training.steps=7"], ["training.steps=07"], ["training.steps = 7"]]
    paths = {plan("copy", "rope", 0, overrides, tmp_path).path for overrides in spellings}
    assert len(paths) == 1 and next(iter(paths)).name.startswith("seed0-") and plain not in paths
    # the card's own value and the plugin's own default are no other configuration
    assert plan("copy", "rope", 0, ["training.steps=6000", "encoding.base=10000.0", "encoding.scaling='none'"], tmp_path).path == plain
    planned = plan("copy", "rope", 0, ["training.steps=7", "encoding.base=500"], tmp_path)
    assert planned.settings == {"encoding.base": 500, "training.steps": 7}
    assert planned.encoding["params"] == {"base": 500, "scaling": "none", "factor": None, "yarn_alpha": 1.0, "yarn_beta": 32.0}


def test_an_atomic_write_gives_a_new_file_the_umasks_permissions_and_keeps_an_old_files(tmp_path):
    # The temporary file is made 0o600; a record or a README must not end up so.
    previous = os.umask(0o022)
    try:
        write_atomically(tmp_path / "new.json", "{}")
    finally:
        os.umask(previous)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644
    (tmp_path / "new.json").chmod(0o640)
    write_atomically(tmp_path / "new.json", "{\"a\": 1}")
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640 and (tmp_path / "new.json").read_text() == '{"a": 1}'
