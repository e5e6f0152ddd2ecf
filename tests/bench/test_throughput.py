"""`pebench bench --quick` runs every part of the throughput benchmark (its figures are not tested:
speed is measured in benchmarks/, never asserted in tests); FLOP counts have known answers."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from pebench.bench import throughput as bench
from pebench.bench.throughput import Bench, Contender, Settings, Shape, contenders, peak_memory_mb, run_benchmark, six_nd, step_flops, summary, with_ratios
from pebench.cli import build_parser, main
from pebench.cli.bench import output_folder
from pebench.config.cards import encoding_card
from pebench.core.registry import build_encoding
from pebench.encodings.attention import BiasedAttention
from pebench.model.transformer import ModelConfig, Transformer
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
    assert (table.train_flops > table.train_flops_6nd).all() and (table.train_flops_6nd > 0).all()  # 6ND leaves out attention and the output projection
    assert table.matmul_fraction.map(math.isfinite).all() and (table.matmul_fraction > 0).all()  # flow+adjoint's too: counted through its adjoint solve
    assert table.matmul_gflops_per_second.map(math.isfinite).all() and (table.matmul_gflops_per_second > 0).all()
    peer = table[table.implementation == "x-transformers"]
    assert list(peer.contender) == ["x-transformers:rope"] and list(peer["shape"]) == ["dec 32"]  # decoder-only peer
    rope = table[(table.contender == "rope") & (table["shape"] == "dec 32")].iloc[0]
    assert math.isclose(rope.train_vs_peer, rope.train_tokens_per_second / peer.iloc[0].train_tokens_per_second, rel_tol=1e-4)  # CSV: 6 digits
    markdown = (tmp_path / "throughput.md").read_text()
    assert "Command: `pebench bench --quick" in markdown and "relative to NoPE" in markdown
    assert "GFLOP/step" in markdown and "of matmul rate" in markdown
    rates = markdown.split("Matmul rate")[1].splitlines()[0]
    assert "dec 32: " in rates and "[512 x 64] @ [64 x 256]" in rates  # 16 x 32 tokens, d_model 64, d_ff = vocabulary = 256
    assert "enc-dec 32: " in rates and "[256 x 256] @ [256 x 8000]" in rates  # 8 x 32 tokens per stack, d_model 256, vocabulary 8,000
    assert "FlopCounterMode" in json.loads((tmp_path / "throughput.json").read_text())["flops"]["train_flops"]
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


def test_a_training_step_counts_the_flops_of_its_layers_shapes():
    # NoPE, d_model 8, 2 heads (d_h 4), 1 layer, d_ff 32, vocabulary 256; batch 4 x length 16 = 64 tokens.
    # Products per token (multiply-adds): query 8x8 = 64, key-value 8x16 = 128, output 8x8 = 64,
    # feed-forward 8x32 = 256 and 32x8 = 256, logits 8x256 = 2,048: 2,816. Forward 2 FLOPs per
    # multiply-add, backward 4 (the input's and the weight's gradients): 6 x 2,816 x 64 = 1,081,344.
    # Attention (SDPA, counted dense: the causal half is not discounted), one product of
    # [b h, s, d_h] by [b h, d_h, s] = 2 x 4 x 2 x 16 x 16 x 4 = 16,384 FLOPs: forward 2 (q k^T,
    # p v), backward 5 (q k^T again, dO v^T, p^T dO, dS k, dS^T q): 7 x 16,384 = 114,688.
    # The AdamW step, LayerNorm, GELU, softmax and cross-entropy: no products, not counted.
    # 6ND: parameters outside the embedding: 72 + 144 + 72 + 288 + 264 (linears, with biases)
    # + 3 LayerNorms x 16 = 888; 6 x 888 x 64 = 340,992.
    config = ModelConfig(d_model=8, n_heads=2, n_layers=1, d_ff=32)
    settings = Settings(shapes=(Shape("decoder", 16),), tokens_per_batch=64)
    tiny = Contender("nope", "pebench", lambda shape: Transformer(config, 256, build_encoding(encoding_card("nope"), config.geometry(16, 16))))
    step = Bench(tiny, settings.shapes[0], settings, torch.Generator().manual_seed(0))
    assert step_flops(step.train_step) == 1_081_344 + 114_688
    assert six_nd(step.model, settings.shapes[0], settings.batch_size(settings.shapes[0])) == 340_992


def test_the_count_sees_the_products_inside_a_custom_autograd_function():
    # BiasedAttention (a torch.autograd.Function) computes its products itself: without a causal
    # mask every key is scored, so forward q k^T and p v, backward p^T dO, dO v^T, dS K and dS^T Q:
    # 6 products of [b h, s, d_h] by [b h, d_h, s], each 2 x 2 x 3 x 8 x 8 x 4 = 3,072 FLOPs.
    q, k, v = (torch.randn(2, 3, 8, 4, requires_grad=True) for _ in range(3))
    mask = torch.zeros(1, 3, 8, 8, requires_grad=True)
    assert step_flops(lambda: BiasedAttention.apply(q, k, v, mask, False).sum().backward()) == 6 * 3_072
