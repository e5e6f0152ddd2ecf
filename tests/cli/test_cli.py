"""End-to-end runs of the `pebench` command on tiny budgets (real training, real records)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pebench import PositionalEncoding
from pebench.records.types import RunRecord
from pebench.records.store import is_complete
from pebench.core.registry import ENCODINGS, plugins
from tests.pebench_command import TINY, pebench, pebench_here


def test_run_writes_a_complete_record_and_prints_the_buckets(tmp_path):
    out = pebench("run", "--encoding", "flow", "--task", "copy", "--seed", "3", "--results", str(tmp_path), *TINY)
    assert out.returncode == 0, out.stderr
    assert "17-32" in out.stdout and "sequence_accuracy" in out.stdout and "OOD score" in out.stdout and "tok/s" in out.stdout
    [path] = (tmp_path / "runs" / "copy" / "flow").glob("seed3-*.json")  # overridden config: hashed name
    record = json.loads(path.read_text())
    validated = record["training"]["curve"][-1]["validation"]["sequence_accuracy"]  # the target is judged there, not on the ID bucket
    assert f"ID target 0.99 NOT reached, {validated:.3f} on the ID validation set, not the evaluation set above" in out.stdout
    assert is_complete(RunRecord.from_json(record)) and record["protocol"] == 2
    assert record["encoding"]["params"]["placement"] == "attention" and record["encoding"]["params"]["adjoint"] is False
    assert record["settings"] == {"split.eval_examples": 20, "split.validation_examples": 16, "training.eval_every": 10,
                                  "training.steps": 30, "training.warmup_steps": 5}
    training = record["training"]
    assert training["tokens_per_second"] > 0 and training["peak_memory_mb"] > 0 and training["step_cap"] == 30
    assert [point["step"] for point in training["curve"]][:1] == [10] and training["steps"] in (10, 20, 30)
    assert record["parameters"]["encoding"] > 0
    assert [b["n"] for b in record["buckets"]] == [20, 20, 20, 20]
    assert all(0 <= b["metrics"]["sequence_accuracy"] <= 1 for b in record["buckets"])
    assert [entry["length"] for entry in record["buckets"][1]["lengths"]] == list(range(17, 33))
    assert set(record["scores"]) == {"ID", "OOD", "unscored"} and 0 <= record["scores"]["OOD"]["exact_match"] <= 1
    assert not list(tmp_path.rglob("*.tmp"))


def test_unknown_encoding_exits_nonzero_listing_the_known_ones(tmp_path, capsys):
    out = pebench_here(capsys, "run", "--encoding", "nosuch", "--task", "copy", "--results", str(tmp_path))
    assert out.returncode == 2
    assert "unknown encoding 'nosuch'" in out.stderr and "rope" in out.stderr and "flow" in out.stderr
    assert not (tmp_path / "runs").exists()


def test_impossible_split_exits_with_the_reason(tmp_path, capsys):
    out = pebench_here(capsys, "run", "--encoding", "rope", "--task", "copy", "--results", str(tmp_path), "--set", "split.train=[1, 40]")
    assert out.returncode == 2 and "must lie inside the first (in-distribution) bucket" in out.stderr


def test_a_negative_seed_stops_and_writes_nothing(tmp_path, capsys):
    out = pebench_here(capsys, "run", "--encoding", "rope", "--task", "copy", "--results", str(tmp_path), "--seed", "-1")
    assert out.returncode == 2 and "the seed must be a whole number >= 0" in out.stderr, out.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "encoding, override, message",
    [
        ("learned", "encoding.max_positions=8", "'Learned' represents at most 8 positions, but a sequence of 54 tokens"),  # validation: 18 + 36
        ("learned", "encoding.no_such_param=1", "no parameter 'no_such_param' in encoding 'learned' (Learned); its parameters: max_positions, init_std"),
        ("learned", "split.buckets=[[1, 16], [17, inf]]", "synthetic tasks need bounded length buckets"),
        ("learned", "model.d_model=abc", "model.d_model must be of type int; got 'abc'"),
        ("learned", "model.d_model=0", "model.d_model must be an integer >= 1; got 0"),
        ("learned", "training.steps=0", "training.steps must be an integer >= 1; got 0"),
        ("learned", "training.lr=-1", "training.lr must be a number > 0; got -1"),
        ("rope", "encoding.base=0", "RoPE needs base > 0; got 0"),
        ("rope", "encoding.base=-10", "RoPE needs base > 0; got -10"),
        ("rope", "encoding.base=abc", "encoding.base must be of type float; got 'abc'"),
        ("rope", "decoding.beam_size=0", "decoding.beam_size must be an integer >= 1; got 0"),
        ("rope", "decoding.strategy='beam'", 'decoding.strategy = "beam" decodes an encoder-decoder'),
        ("rope", "training.target=-1", "training.target must be a number > 0; got -1"),
        ("rope", "training.schedule='linear'", "training.schedule must be one of cosine, constant; got 'linear'"),
        ("rope", "split.validation_examples=0", "split.validation_examples must be at least 1"),
    ],
)
def test_bad_cards_stop_before_training_and_write_nothing(tmp_path, capsys, encoding, override, message):
    out = pebench_here(capsys, "run", "--encoding", encoding, "--task", "copy", "--results", str(tmp_path), "--set", override)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert not (tmp_path / "runs").exists()


def test_list_shows_encodings_with_references_and_tasks(capsys):
    out = pebench_here(capsys, "list")
    assert out.returncode == 0
    for name in ("sinusoidal", "learned", "relative", "rope", "flow", "flow_input", "nope", "copy", "reverse", "sort", "addition"):
        assert name in out.stdout
    assert "arXiv:2003.09229" in out.stdout
    lm_long = next(line for line in out.stdout.splitlines() if " lm_long " in line)
    assert " 64 characters" in lm_long and "64-64" not in lm_long  # trained at one context length
    copy = next(line for line in out.stdout.splitlines() if " copy " in line)
    assert " 1-16 symbols" in copy


def test_the_command_flushes_denormals_to_zero_on_every_cpu_thread():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    torch.set_flush_denormal(False)
    # The bit pattern 713 is the float32 denormal 713 * 2^-149 (1e-42); its 2^22 products are split
    # between two threads, and a worker thread that kept torch's default leaves them nonzero (as
    # when the flag is set after torch's first parallel operation: half of them, measured).
    probe = ("import torch; from pebench.cli import main; main(['list']); "
             "x = torch.full((1 << 22,), 713, dtype=torch.int32).view(torch.float32); print(int((x * 1.0).count_nonzero()))")
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "0"


@pytest.mark.slow
def test_report_on_a_small_sweep_prints_a_leaderboard(tmp_path):
    for encoding in ("nope", "rope"):
        for seed in (0, 1):
            out = pebench("run", "--encoding", encoding, "--task", "reverse", "--seed", str(seed), "--results", str(tmp_path), *TINY)
            assert out.returncode == 0, out.stderr
    out = pebench("report", str(tmp_path))
    assert out.returncode == 0, out.stderr
    [written] = [line for line in out.stdout.splitlines() if line.startswith("written to ")]
    assert ": 1 task table (reverse@" in written and "validity.md, runtime.md, legend.md" in written and "overall" not in written  # none was written
    label = re.search(r"^(reverse@[0-9a-f]{8}):", out.stdout, flags=re.M).group(1)  # the tiny budget's table
    assert f"{label}: sequence_accuracy (ID = 1-16; buckets 1-16, 17-32, 33-48, 49-64), mean ± 95% interval over runs" in out.stdout
    assert f"{label}: exact_match" in out.stdout and f"{label}: teacher_forced_accuracy" in out.stdout
    assert "training.steps=30" in out.stdout  # the legend says what the label stands for
    boards = tmp_path / "leaderboards"
    markdown = (boards / f"{label}.md").read_text()
    assert "| encoding" in markdown and "learned ID" in markdown and "no benchmark table (run `pebench bench`)" in markdown
    csv = (boards / f"{label}.csv").read_text().splitlines()
    assert csv[0].startswith("metric,encoding,runs,learned,target,ranked,steps,ID mean,ID ci") and len(csv) == 7  # 2 encodings x 3 metrics
    assert "\\toprule" in (boards / f"{label}.tex").read_text() and "<table>" in (boards / f"{label}.html").read_text()
    assert (boards / f"{label}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (boards / "overall.md").exists()  # a table of other settings is not one of the benchmark's tasks
    assert "claim" in (boards / "validity.md").read_text()
    assert "No protocol 2 run at the cards' settings yet." in (boards / "runtime.md").read_text()  # nor in the run time of the grid
    readme = tmp_path / "README.md"
    readme.write_text("# Results\n\n<!-- generated: leaderboards/validity.md -->\nold\n<!-- end -->\n")
    out = pebench("report", str(tmp_path), "--readme", str(readme))
    assert out.returncode == 0, out.stderr
    assert readme.read_text() == "# Results\n\n<!-- generated: leaderboards/validity.md -->\n" + (boards / "validity.md").read_text() + "<!-- end -->\n"
    out = pebench("report", str(tmp_path), "--readme", str(tmp_path / "MISSING.md"))
    assert out.returncode == 2 and "MISSING.md: no such file" in out.stderr


def test_report_without_records_says_what_to_do(tmp_path, capsys):
    out = pebench_here(capsys, "report", str(tmp_path))
    assert out.returncode == 2 and "pebench run --encoding" in out.stderr


def test_report_given_the_runs_folder_names_the_results_folder(tmp_path, capsys):
    record = tmp_path / "runs" / "copy" / "rope" / "seed0.json"
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    out = pebench_here(capsys, "report", str(tmp_path / "runs"))
    assert out.returncode == 2 and f"is a runs/ folder: give the results folder that holds it, `pebench report {tmp_path}`" in out.stderr


def test_an_empty_seed_range_is_refused(tmp_path, capsys):
    out = pebench_here(capsys, "sweep", "--tasks", "copy", "--encodings", "rope", "--seeds", "2-0", "--results", str(tmp_path))
    assert out.returncode == 2 and "--seeds 2-0 is an empty range (its last seed comes before its first): write 0-2" in out.stderr
    assert not (tmp_path / "runs").exists()


class BrokenConstructor(PositionalEncoding):
    """A plugin whose constructor has a bug of its own (not a bad parameter)."""

    def __init__(self, geometry):
        super().__init__(geometry)
        self.scale = 1 / (geometry.d_model - geometry.d_model)


def test_a_plugin_whose_constructor_raises_is_named_not_a_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(plugins(ENCODINGS), "broken", BrokenConstructor)
    out = pebench_here(capsys, "run", "--encoding", "broken", "--task", "copy", "--results", str(tmp_path), *TINY)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "encoding 'broken' (BrokenConstructor) failed to build: ZeroDivisionError: division by zero (raised at test_cli.py:" in out.stderr


def test_the_public_names_are_importable_from_pebench():
    from pebench import Geometry, PositionalEncoding, PositionLimitError, Site, require_range  # noqa: F401  (the README's names)

    with pytest.raises(ValueError, match="RoPE needs base > 0; got 0"):
        require_range("RoPE", "base", 0, above=0)


def test_the_record_says_which_rope_scaling_each_bucket_ran_under(tmp_path):
    out = pebench("run", "--encoding", "rope_yarn", "--task", "copy", "--results", str(tmp_path), *TINY)
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs" / "copy" / "rope_yarn").glob("*.json")
    record = json.loads(path.read_text())
    states = [b["encoding_state"] for b in record["buckets"]]
    assert states[0] == {"rope_scaling": "none", "factor": 1.0}
    assert [s["rope_scaling"] for s in states[1:]] == ["yarn"] * 3
    factors = [s["factor"] for s in states]
    lengths = record["sequence_lengths"]  # training sequences reach 34 tokens, bucket 49-64 up to 64 + 2 + 108 (the output cap)
    assert lengths["train"] == 34 and lengths["max"] == 174
    # the factor is the bucket's longest sequence with its target as output (64 + 64 + 2), not its cap
    assert 1 < factors[1] < factors[2] < factors[3] == pytest.approx(130 / 34, abs=1e-4)


def test_a_closed_output_pipe_is_not_an_error():
    out = subprocess.run(f"{sys.executable} -m pebench list | head -1", shell=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("encoding") and "Traceback" not in out.stderr


def test_the_command_starts_without_the_report_s_libraries():
    # pandas and scipy add seconds to every start (`pebench run`, `list`, each run of a sweep);
    # only `pebench report` and the benchmark's tables need them, and they import them there.
    probe = "import sys, pebench.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'scipy', 'matplotlib'}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_training_curve_is_in_the_record_and_in_tensorboard_on_request(tmp_path):
    out = pebench("run", "--encoding", "nope", "--task", "copy", "--results", str(tmp_path), *TINY, "--log", "tensorboard")
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs" / "copy" / "nope").glob("*.json")
    curve = json.loads(path.read_text())["training"]["curve"]
    assert [point["step"] for point in curve] == [10, 20, 30] and all("sequence_accuracy" in point["validation"] for point in curve)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    [events] = (tmp_path / "tensorboard" / "copy" / "nope").glob(f"{path.stem}/events.out.tfevents.*")
    accumulator = EventAccumulator(str(events.parent))
    accumulator.Reload()
    assert len(accumulator.Scalars("train/loss")) == 30 and [e.step for e in accumulator.Scalars("validation/sequence_accuracy")] == [10, 20, 30]


def test_plan_gives_the_seeds_a_claims_pairs_need_and_the_sweep_that_runs_them(tmp_path, capsys):
    # The committed sort records of nope and t5 at seeds 0-2: nope - t5 in OOD exact match has
    # mean +0.278 and s.d. 0.177 over the three seeds, 6 seeds for 80% power (docs/seed-plan.md).
    for encoding in ("nope", "t5"):
        for seed in range(3):
            source = Path("results/runs/sort") / encoding / f"seed{seed}.json"
            (tmp_path / "runs/sort" / encoding).mkdir(parents=True, exist_ok=True)
            shutil.copy(source, tmp_path / "runs/sort" / encoding / source.name)
    out = pebench_here(capsys, "plan", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert re.search(r"\| +4 \| nope > t5 +\| sort +\| +3 \| +0\.278 \| 0\.177 \| +6 \|", out.stdout)
    assert "pebench sweep --tasks sort --encodings nope,t5 --seeds 0-5 --results results --threads 1" in out.stdout
    assert "6 runs," in out.stdout
