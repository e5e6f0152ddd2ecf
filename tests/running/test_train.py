"""Training to ID competence: the stop at the target and at the step cap, the curve, the
divergence check (real training steps; the validation scores are scripted), and what the
summary measures of the loop: its time split and the padding share of its batches."""

import dataclasses
import math

import pytest
import torch

from pebench.running import train as training_module
from pebench.records.types import to_json
from pebench.config.cards import encoding_card, task_card
from pebench.config.overrides import apply_overrides
from pebench.config.protocol import SECTION_KEYS, resolve
from pebench.model.architecture import Architecture
from pebench.model.batching import pack
from pebench.model.transformer import PAD
from pebench.running.train import NonFiniteError, set_up, train
from pebench.tasks.base import Example

CPU = torch.device("cpu")


def protocol(*overrides):
    task = task_card("copy")
    apply_overrides(task, encoding_card("nope"), ["training.warmup_steps=2", "split.validation_examples=8", *overrides], SECTION_KEYS)
    return resolve(task)


def scripted(monkeypatch, values):
    """Validation returns ``values`` in turn (sequence accuracy; the other metrics fixed)."""
    scores = iter(values)
    monkeypatch.setattr(training_module, "validate", lambda *args: {"sequence_accuracy": next(scores), "exact_match": 0.0, "teacher_forced_accuracy": 0.0})


def run_training(card):
    setup = set_up(card, encoding_card("nope"), 0)
    return to_json(train(setup.model, card, 0, CPU, setup.validation, progress=False))


def test_training_stops_at_the_first_validation_that_reaches_the_target(monkeypatch):
    scripted(monkeypatch, [0.5, 0.8, 0.95, 1.0])
    result = run_training(protocol("training.steps=40", "training.eval_every=10", "training.target=0.9"))
    assert result["steps"] == 30 and result["steps_to_target"] == 30 and result["step_cap"] == 40
    assert [point["step"] for point in result["curve"]] == [10, 20, 30]
    assert [point["validation"]["sequence_accuracy"] for point in result["curve"]] == [0.5, 0.8, 0.95]
    assert all(point["loss"] > 0 for point in result["curve"])


def test_training_runs_to_the_cap_when_the_target_is_not_reached_and_validates_there(monkeypatch):
    scripted(monkeypatch, [0.1, 0.2, 0.3, 0.4])
    result = run_training(protocol("training.steps=35", "training.eval_every=10", "training.target=0.9"))
    assert result["steps"] == 35 and result["steps_to_target"] is None
    assert [point["step"] for point in result["curve"]] == [10, 20, 30, 35]  # the cap is scored too


def test_without_a_target_the_budget_is_fixed(monkeypatch):
    scripted(monkeypatch, [1.0, 1.0])
    card = protocol("training.steps=20", "training.eval_every=10")
    card.training = dataclasses.replace(card.training, target=None)  # as the wmt_long card, which sets none
    result = run_training(card)
    assert result["steps"] == 20 and result["steps_to_target"] is None and result["target"] is None


def test_a_loss_that_is_not_finite_stops_the_run_with_its_step_and_value(monkeypatch):
    scripted(monkeypatch, [0.5] * 10)
    real_loss = training_module._loss
    calls = []

    def diverging(model, batch, smoothing, total_targets=None):
        calls.append(1)
        loss = real_loss(model, batch, smoothing, total_targets)
        return loss * math.nan if len(calls) == 7 else loss

    monkeypatch.setattr(training_module, "_loss", diverging)
    with pytest.raises(NonFiniteError, match="the training loss at step 7 is nan"):
        run_training(protocol("training.steps=20", "training.eval_every=10"))


def test_a_validation_score_that_is_not_finite_stops_the_run(monkeypatch):
    scripted(monkeypatch, [math.inf])
    with pytest.raises(NonFiniteError, match="the validation sequence_accuracy at step 5 is inf"):
        run_training(protocol("training.steps=20", "training.eval_every=5"))


@pytest.mark.parametrize(
    "schedule, expected",
    # warm-up of 4 steps to 1, then over steps 4..20 cosine 1 -> 0.1 (at the middle, step 12:
    # 0.1 + 0.45 (1 + cos(pi/2)) = 0.55), or constant 1.
    [("cosine", [0.25, 1.0, 1.0, 0.55, 0.1]), ("constant", [0.25, 1.0, 1.0, 1.0, 1.0])],
)
def test_the_learning_rate_schedule(schedule, expected):
    card = protocol("training.steps=20", "training.warmup_steps=4", f"training.schedule='{schedule}'")
    factors = [training_module._learning_rate_factor(step, card.training.warmup_steps, card.training.steps, card.training.schedule) for step in (0, 3, 4, 12, 20)]
    assert factors == pytest.approx(expected)


def copy_example(length):
    return Example(source=tuple(range(length)), target=tuple(range(length)), length=length)


def test_the_padding_share_is_the_padding_of_all_the_training_batches_over_all_their_tokens(monkeypatch):
    # Decoder-only copy reads BOS source SEP target (EOS is only predicted): 2 * length + 2 tokens.
    # Step 1, lengths 2 and 4: rows of 6 and 10, padded to [2, 10]: 4 PAD of 20 tokens.
    # Step 2, lengths 1 and 2: rows of 4 and 6, padded to [2, 6]: 2 PAD of 12 tokens.
    # The share: (4 + 2) / (20 + 12) = 6 / 32 = 0.1875 (the mean of the two batches' shares,
    # (0.2 + 0.1667) / 2 = 0.1833, would be wrong: every token counts once).
    scripted(monkeypatch, [0.0])
    monkeypatch.setattr(training_module, "training_batches", lambda *args: iter([[copy_example(2), copy_example(4)], [copy_example(1), copy_example(2)]]))
    result = run_training(protocol("training.steps=2", "training.eval_every=2", "training.batch_size=2"))
    assert result["steps"] == 2 and result["padding_share"] == 0.1875


def test_an_encoder_decoders_padding_counts_its_source_too():
    # Encoder-decoder, lengths 1 and 4: the encoder reads source EOS (2 and 5 tokens, padded to
    # [2, 5]: 3 PAD), the decoder BOS target (2 and 5, padded to [2, 5]: 3 PAD): 6 PAD of 20.
    batch = pack([copy_example(1), copy_example(4)], Architecture.ENCODER_DECODER)
    assert batch.source is not None and (batch.num_positions - batch.num_tokens, batch.num_positions) == (6, 20)
    assert int((batch.tokens == PAD).sum()) == 3


def test_a_short_run_splits_its_training_time_into_steps_batches_and_validation():
    # Real steps and real validation; each part is timed apart, so their sum is at most the
    # loop's wall time (each part rounded to 0.01 s), and falls short of it only by the loop's
    # own bookkeeping (the progress bar, the validation decision), far less than half.
    result = run_training(protocol("training.steps=20", "training.eval_every=10"))
    parts = result["step_seconds"] + result["batch_seconds"] + result["validation_seconds"]
    assert min(result["step_seconds"], result["batch_seconds"], result["validation_seconds"]) >= 0
    assert result["step_seconds"] > 0 and result["validation_seconds"] > 0
    assert parts <= result["wall_seconds"] + 0.02
    assert parts >= result["wall_seconds"] / 2
    assert 0 <= result["padding_share"] < 1
