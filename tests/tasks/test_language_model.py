"""Language modelling past the training length (lm_long): the two evaluations of Press et al. on
known answers, the tiny-shakespeare split, the WikiText-103 hub path with the hub stubbed, a run."""

import json
import math
import os
from pathlib import Path

import pytest

from pebench.tasks import data as pebench_data
import torch

from pebench.config.cards import task_card
from pebench.running.perplexity import score_length, token_losses, windows
from pebench.config.protocol import resolve
from tests.pebench_command import pebench

DATA = Path(os.environ.get("PEBENCH_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "tinyshakespeare").is_dir(), reason=f"no shared data at {DATA}")


class Uniform(torch.nn.Module):
    """Zero logits: every one of V tokens equally likely."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, tokens, identity=None):
        return torch.zeros(*tokens.shape, self.vocab)


class Counting(torch.nn.Module):
    """Logits that reveal the context length: position i's loss is i + 1 (nats) exactly, so a
    token's NLL says how much context it was predicted from."""

    def forward(self, tokens, identity=None):
        b, n = tokens.shape
        logits = torch.zeros(b, n, 64)
        logits[..., 0] = torch.arange(n, dtype=torch.float) + 1  # every real token gets log-probability about -(i + 1)
        return logits


@pytest.mark.parametrize("length, stride", [(16, 16), (16, 4), (7, 3), (50, 50)])
def test_every_token_is_scored_exactly_once(length, stride):
    total = 103
    scored = [0] * total
    for start, inputs, first in windows(total, length, stride):
        for i in range(first, inputs):
            scored[start + i + 1] += 1  # input position i predicts t_{start + i + 1}
    assert scored == [0] + [1] * (total - 1)


def test_a_uniform_model_has_the_vocabulary_size_as_perplexity():
    vocab = 29
    metrics, _, read = score_length(Uniform(vocab), list(range(20)) * 10, 16, 4, 1024, torch.device("cpu"))
    assert read == 199 + sum(inputs for _, inputs, _ in windows(200, 16, 4))  # both evaluations' windows
    assert metrics["perplexity"] == pytest.approx(vocab) and metrics["sliding_perplexity"] == pytest.approx(vocab)
    assert metrics["bits_per_token"] == pytest.approx(math.log2(vocab))


def test_sliding_and_nonoverlapping_agree_when_the_stride_is_the_window_and_the_sliding_one_gives_more_context():
    tokens = list(range(10)) * 20  # 200 tokens
    model = Counting()
    same, _ = token_losses(model, tokens, 16, 16, 4096, torch.device("cpu"))
    stride_window = score_length(model, tokens, 16, 16, 4096, torch.device("cpu"))[0]
    assert stride_window["perplexity"] == stride_window["sliding_perplexity"]
    sliding, positions = token_losses(model, tokens, 16, 4, 4096, torch.device("cpu"))
    # after the first window every token is predicted at one of the window's last 4 positions
    assert positions[:16].tolist() == list(range(16)) and set(positions[16:].tolist()) <= {12, 13, 14, 15}
    assert set(token_losses(model, tokens, 16, 16, 4096, torch.device("cpu"))[1].tolist()) == set(range(16))
    assert torch.equal(same, token_losses(model, tokens, 16, 16, 4096, torch.device("cpu"))[0])
    assert sliding.mean() > same.mean()  # this model's loss grows with the position: more context, more loss


@needs_data
def test_tiny_shakespeare_is_split_90_10_with_validation_held_out_of_training(monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    task = resolve(task_card("lm_long")).task
    text = (DATA / "tinyshakespeare" / "input.txt").read_text()
    counts = task.data["tokens"]
    assert counts["train"] + counts["validation"] == int(0.9 * len(text)) and counts["evaluation"] == 32768
    decode = lambda ids: "".join(task.symbols[i] for i in ids)  # noqa: E731
    assert decode(task.train_ids[:40]) == text[:40]
    assert decode(task.evaluation_ids[:40]) == text[int(0.9 * len(text)) :][:40]
    assert len(task.symbols) == 65


def test_wikitext_103_loads_from_the_hub(monkeypatch, tmp_path):
    import datasets

    def fake_hub(name, config):
        assert (name, config) == ("wikitext", "wikitext-103-raw-v1")
        lines = {"text": [" = Valkyria Chronicles = \n", "", " The game began development in 2010 .\n"]}
        return {split: datasets.Dataset.from_dict(lines) for split in ("train", "validation", "test")}

    monkeypatch.delenv("PEBENCH_DATA", raising=False)
    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    monkeypatch.setattr(pebench_data, "hub_reachable", lambda: True)  # the hub is stubbed, not reached
    card = task_card("lm_long_wikitext103")
    card["params"]["vocab_size"] = 300
    task = resolve(card).task
    assert task.data["origin"] == "hub:wikitext/wikitext-103-raw-v1"
    assert len(task.train_ids) == len(task.evaluation_ids) > 10  # the empty line is left out


@needs_data
def test_an_lm_long_run_records_both_evaluations_at_every_length(tmp_path):
    out = pebench("run", "--encoding", "alibi", "--task", "lm_long", "--data-dir", str(DATA), "--results", str(tmp_path), "--quiet",
                  "--set", "training.steps=10", "--set", "training.eval_every=5", "--set", "params.eval_tokens=2048")
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs" / "lm_long" / "alibi").glob("*.json")
    record = json.loads(path.read_text())
    assert [b["bucket"] for b in record["buckets"]] == ["64", "128", "256", "512", "1024"]
    assert all(set(b["metrics"]) == {"perplexity", "bits_per_token", "sliding_perplexity", "sliding_bits_per_token"} for b in record["buckets"])
    assert record["buckets"][0]["metrics"]["perplexity"] == record["buckets"][0]["metrics"]["sliding_perplexity"]  # stride 64 = the window
    assert record["buckets"][-1]["n"] == 2047 and len(record["buckets"][-1]["loss_by_position"]) == 64
    assert [point["step"] for point in record["training"]["curve"]] == [5, 10] and record["training"]["steps_to_target"] is None
