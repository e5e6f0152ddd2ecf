"""`pebench bench --quick` runs every part of the throughput benchmark (its figures are not tested:
speed is measured in benchmarks/, never asserted in tests)."""

import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from pebench.bench import throughput as bench
from pebench.bench.throughput import Settings, Shape, contenders, peak_memory_mb, run_benchmark, summary, with_ratios
from pebench.cli import build_parser, main
from pebench.cli.bench import output_folder
from tests.pebench_command import pebench


@pytest.mark.slow
def test_quick_benchmark_measures_every_contender_and_saves_the_tables(tmp_path):
    pytest.importorskip("x_transformers")
    out = pebench("bench", "--quick", "--encodings", "nope,rope,relative,flow,flow+adjoint", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    table = pd.read_csv(tmp_path / "throughput.csv")
    pebench_rows = table[table.implementation == "pebench"]
    assert sorted(set(pebench_rows.contender)) == ["flow", "flow+adjoint", "nope", "relative", "rope"]
    assert sorted(set(table["shape"])) == ["dec 32", "enc-dec 32"] and len(pebench_rows) == 10
    assert (pebench_rows.train_tokens_per_second > 0).all() and (pebench_rows.eval_tokens_per_second > 0).all()
    peer = table[table.implementation == "x-transformers"]
    assert list(peer.contender) == ["x-transformers:rope"] and list(peer["shape"]) == ["dec 32"]  # decoder-only peer
    rope = table[(table.contender == "rope") & (table["shape"] == "dec 32")].iloc[0]
    assert math.isclose(rope.train_vs_peer, rope.train_tokens_per_second / peer.iloc[0].train_tokens_per_second, rel_tol=1e-4)  # CSV: 6 digits
    markdown = (tmp_path / "throughput.md").read_text()
    assert "Command: `pebench bench --quick" in markdown and "relative to NoPE" in markdown
    assert not (tmp_path / "summary.md").exists()  # none of the README's headline shapes was measured
    assert out.stdout.strip().splitlines()[-1] == "written: " + ", ".join(str(tmp_path / name) for name in ("throughput.md", "throughput.csv", "throughput.json"))


def test_a_quick_benchmark_never_replaces_the_figures_the_report_reads():
    assert output_folder(build_parser().parse_args(["bench"])) == Path("pebench-results/throughput")  # where `pebench report` reads
    assert output_folder(build_parser().parse_args(["bench", "--results", "results"])) == Path("results/throughput")
    assert output_folder(build_parser().parse_args(["bench", "--quick"])) == Path("pebench-results/throughput/quick")
    assert output_folder(build_parser().parse_args(["bench", "--quick", "--out", "here"])) == Path("here")


def test_ratios_are_step_times_over_nope_in_the_same_shape():
    table = pd.DataFrame({
        "contender": ["nope", "rope", "nope", "rope", "x-transformers:rope"],
        "implementation": ["pebench"] * 4 + ["x-transformers"],
        "shape": ["dec 64", "dec 64", "dec 256", "dec 256", "dec 256"],
        "train_seconds": [1.0, 1.5, 2.0, 2.2, 4.4], "eval_seconds": [0.5, 0.5, 1.0, 2.0, 1.0],
        "train_tokens_per_second": [100.0, 200 / 3, 50.0, 1000 / 22, 1000 / 44],
    })
    ratios = with_ratios(table)
    assert ratios.train_vs_nope.tolist() == pytest.approx([1.0, 1.5, 1.0, 1.1, 2.2])
    assert ratios.eval_vs_nope.tolist() == pytest.approx([1.0, 1.0, 1.0, 2.0, 1.0])
    assert math.isnan(ratios.train_vs_peer[1]) and ratios.train_vs_peer[3] == pytest.approx(2.0)
    # The README's summary: the headline shapes measured here (dec 256 only), a row per contender.
    lines = summary(ratios.assign(eval_peak_mb=float("nan"))).splitlines()
    cells = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines]
    assert cells[0] == ["contender", "dec 256 train tok/s", "train × NoPE", "eval × NoPE", "vs x-transformers (dec 256)"]
    assert cells[2:] == [["nope", "50", "1.00", "1.00", "—"], ["rope", "45", "1.10", "2.00", "2.00"], ["x-transformers:rope", "23", "2.20", "1.00", "—"]]


def test_peak_memory_sees_a_tensor_made_inside_the_call():
    held = []
    megabytes = peak_memory_mb(lambda: held.append(torch.ones(64, 2**20)), torch.device("cpu"))  # 64 Mi float32 = 256 MiB
    assert 256 <= megabytes < 257


def test_peak_memory_counts_what_is_held_at_once_not_what_was_held_before():
    before = torch.ones(32, 2**20)  # 128 MiB held before the call: not counted

    def one_after_another():
        for _ in range(3):
            torch.ones(16, 2**20).sum()  # 64 MiB, freed before the next

    def together():
        return [torch.ones(16, 2**20) for _ in range(3)]  # 3 x 64 MiB at once

    assert 64 <= peak_memory_mb(one_after_another, torch.device("cpu")) < 65
    assert 192 <= peak_memory_mb(together, torch.device("cpu")) < 193
    assert before.shape == (32, 2**20)


def test_every_shape_sees_its_memory():
    # Read from the process's resident set, a later shape reused freed blocks and read 0 MiB.
    # Logits alone are 8,192 tokens x 256 x 4 bytes = 8 MiB.
    settings = Settings(shapes=(Shape("decoder", 32), Shape("decoder", 64)), rounds=1, encodings=("nope", "sinusoidal"), peer=False)
    table = run_benchmark(settings, contenders(settings))
    assert (table.train_peak_mb >= 8).all() and (table.eval_peak_mb >= 8).all(), table[["contender", "shape", "train_peak_mb", "eval_peak_mb"]]


def test_a_stopped_run_keeps_the_shapes_it_timed_and_leaves_the_last_whole_table_alone(tmp_path, monkeypatch):
    command = ["bench", "--shapes", "decoder:32,decoder:256", "--rounds", "1", "--tokens", "256", "--encodings", "nope,rope", "--no-peer", "--out", str(tmp_path)]
    assert main(command) == 0  # a whole run: dec 256 is a headline shape, so it has a summary
    whole = {name: (tmp_path / name).read_text() for name in ("throughput.md", "throughput.csv", "throughput.json", "summary.md")}
    assert not (tmp_path / "partial").exists()
    measure_speed = bench.measure_speed

    def stopped_at_the_second_shape(shape, *args):
        if shape.length == 256:
            raise KeyboardInterrupt
        measure_speed(shape, *args)

    monkeypatch.setattr(bench, "measure_speed", stopped_at_the_second_shape)
    assert main(command) == 130  # Ctrl-C: one line, exit 130
    assert {name: (tmp_path / name).read_text() for name in whole} == whole  # the whole run's tables, untouched
    partial = pd.read_csv(tmp_path / "partial" / "throughput.csv")
    assert list(partial.contender) == ["nope", "rope"] and set(partial["shape"]) == {"dec 32"}
    assert (partial.train_tokens_per_second > 0).all() and partial.train_vs_nope.tolist()[0] == 1.0
    assert "dec 256" not in (tmp_path / "partial" / "throughput.md").read_text()
    assert not (tmp_path / "partial" / "summary.md").exists()  # no headline shape was timed
    monkeypatch.undo()
    assert main(command) == 0 and not (tmp_path / "partial").exists()  # a whole run clears it


def test_a_table_without_a_headline_shape_removes_an_older_summary(tmp_path):
    settings = Settings(shapes=(Shape("decoder", 32),), rounds=1, tokens_per_batch=256, encodings=("nope",), peer=False)
    (tmp_path / "summary.md").write_text("an earlier run's summary")
    table = run_benchmark(settings, contenders(settings))
    assert [p.name for p in bench.write(table, settings, tmp_path, "pebench bench")] == ["throughput.md", "throughput.csv", "throughput.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["throughput.csv", "throughput.json", "throughput.md"]
