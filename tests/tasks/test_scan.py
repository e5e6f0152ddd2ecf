"""SCAN's length split (scan_length): the files, the held-out split, the buckets, the hub path."""

import os
from pathlib import Path

import pytest

from pebench.tasks import data as pebench_data
from pebench.tasks.data import DataNotFoundError

from pebench.config.cards import task_card
from pebench.config.protocol import resolve
from pebench.tasks.scan import read_pairs

DATA = Path(os.environ.get("PEBENCH_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "scan").is_dir(), reason=f"no shared data at {DATA}")


def test_lines_are_read_as_command_and_actions():
    assert read_pairs("IN: jump twice OUT: I_JUMP I_JUMP\nIN: walk OUT: I_WALK\n") == [("jump twice", "I_JUMP I_JUMP"), ("walk", "I_WALK")]


@needs_data
def test_the_length_split_is_held_out_and_bucketed_by_output_actions(monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    protocol = resolve(task_card("scan_length"))
    task = protocol.task
    assert task.data["pairs"] == {"train": 15291, "validation": 849, "id_test": 850, "test": 3920}
    sets = protocol.evaluation_sets()
    assert [len(v) for v in sets.values()] == [850, 1296, 1472, 768, 384]  # the ID pairs held out, then the test file by length
    train = {(e.source, e.target) for e in task.pools["train"]}
    assert not train & {(e.source, e.target) for e in task.pools["validation"] + task.pools["id_test"]}
    example = task.pools["test"][0]
    words = [task.symbols[i] for i in example.source]
    actions = [task.symbols[i] for i in example.target]
    assert example.length == len(actions) >= 24 and all(a.startswith("I_") for a in actions) and not any(w.startswith("I_") for w in words)


@needs_data
def test_kazemnejads_resplit_pools_both_files_and_cuts_at_25_actions(monkeypatch):
    # their make_scan_dataset.py: 20,910 pairs pooled; at most 25 actions: 17,774 (their train
    # 15,997 and validation 1,777), more: 3,136 (lengths 26-48), as their logged counts
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    task = resolve(task_card("kz_scan")).task
    pairs = task.data["pairs"]
    assert pairs["test"] == 3136 and pairs["train"] + pairs["validation"] + pairs["id_test"] == 17774
    assert min(e.length for e in task.pools["test"]) == 26 and max(e.length for e in task.pools["train"]) == 25


def test_scan_loads_from_the_hub_without_a_data_folder(monkeypatch):
    import datasets

    def fake_hub(name, config):
        assert (name, config) == ("scan", "length")
        return {"train": datasets.Dataset.from_dict({"commands": ["jump", "walk twice"], "actions": ["I_JUMP", "I_WALK I_WALK"]}),
                "test": datasets.Dataset.from_dict({"commands": ["jump thrice"], "actions": ["I_JUMP I_JUMP I_JUMP"]})}

    monkeypatch.delenv("PEBENCH_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    monkeypatch.setattr(pebench_data, "hub_reachable", lambda: True)  # the hub is stubbed, not reached
    card = task_card("scan_length")
    card["params"]["held_out"] = 0.5
    task = resolve(card).task
    assert task.data["origin"] == "hub:scan/length" and task.data["pairs"]["test"] == 1


def test_an_unreachable_hub_says_so_at_once_with_the_local_layout(monkeypatch):
    # Without a data folder and without network, no hub client is tried (its retries took 27 s):
    # the error names the files to put under --data-dir.
    import datasets

    def never(*args, **kwargs):
        raise AssertionError("the hub client was called")

    monkeypatch.delenv("PEBENCH_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", never)
    monkeypatch.setattr(pebench_data, "hub_reachable", lambda: False)
    with pytest.raises(DataNotFoundError, match=r"SCAN not found: .*the Hugging Face hub cannot be reached from here\. "
                                                r"Put scan/tasks_train_length\.txt and scan/tasks_test_length\.txt .* `--data-dir FOLDER`"):
        resolve(task_card("scan_length"))
