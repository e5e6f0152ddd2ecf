import pytest
import torch

from pebench.encodings.base import PositionLimitError
from pebench.encodings.randomized import Randomized
from pebench.running.evaluation import seeded
from pebench.model.transformer import ModelConfig

GEOMETRY = ModelConfig(d_model=16, n_heads=2).geometry(32)


def test_training_positions_are_sorted_unique_and_in_range():
    randomized = Randomized(GEOMETRY, base="sinusoidal").train()
    assert randomized.max_position == 128  # 4 x the longest sequence
    for length in (1, 7, 32, 128):
        pos = randomized.positions(length)
        assert len(pos) == length and len(set(pos.tolist())) == length
        assert torch.all(pos[1:] > pos[:-1]) and pos.min() >= 0 and pos.max() < 128
    assert not torch.equal(randomized.positions(20), randomized.positions(20))  # drawn afresh


def test_evaluation_draws_as_training_does_and_every_run_sees_the_same_draws():
    # Ruoss et al. draw sorted random positions at evaluation too; pebench draws them from the
    # evaluation seed, so two runs (other training seeds, other models) see the same positions.
    draws = []
    for training_seed in (0, 1):
        torch.manual_seed(training_seed)
        randomized = Randomized(GEOMETRY, base="rope").train()
        randomized.positions(20)  # training draws move the global generator differently per run
        randomized.eval()
        with seeded("20261129:17-32", torch.device("cpu")):
            draws.append(randomized.positions(30))
    assert torch.equal(draws[0], draws[1])
    pos = draws[0]
    assert len(set(pos.tolist())) == 30 and torch.all(pos[1:] > pos[:-1]) and pos.min() >= 0 and pos.max() < 128
    assert not torch.equal(pos, torch.arange(30))


def test_deterministic_evaluation_positions_on_request():
    arange = Randomized(GEOMETRY, base="rope", eval_positions="arange").eval()
    assert arange.positions(5).tolist() == [0, 1, 2, 3, 4]
    stride = Randomized(GEOMETRY, base="rope", eval_positions="stride").eval()
    assert stride.positions(5).tolist() == [0, 4, 8, 12, 16]  # stride 128 // 32


def test_the_base_is_built_for_l_max_and_limits_are_clear():
    randomized = Randomized(GEOMETRY, base="learned", max_position=50)
    assert randomized.inner.tables["decoder"].shape == (50, 16)
    with pytest.raises(PositionLimitError, match=r"\[0, 50\), which cannot hold a sequence of 51"):
        randomized.positions(51)
    with pytest.raises(ValueError, match="eval_positions must be one of"):
        Randomized(GEOMETRY, eval_positions="shuffled")
