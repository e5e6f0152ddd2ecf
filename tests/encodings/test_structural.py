"""Abacus and position coupling: ids from structural positions, worked by hand from McLeish et
al. 2024 (sec. 3, the authors' abacus.py) and Cho et al. 2024 (sec. 3, their
AdditionDatasetWithCoupledPositions), and the embedding they add."""

import pytest
import torch

from pebench.model.batching import pack, structure_rows
from pebench.encodings.base import PositionLimitError, StructureError
from pebench.tasks.base import Example
from tests.helpers import build

# 57 + 8 = 65, every number least-significant digit first: source 7 5 + 8, target 5 6.
# Decoder-only tokens BOS 7 5 + 8 SEP 5 6 (EOS is never read): structural positions by hand,
# BOS 0, units 1, tens 2, '+' 0, units 1, SEP 0, then the answer's digits 1, 2.
EXAMPLE = Example(source=(7, 5, 10, 8), target=(5, 6), length=2, structure=(1, 2, 0, 1), cell=(2, 1))
STRUCTURE = [[0, 1, 2, 0, 1, 0, 1, 2]]


def test_structural_positions_of_the_decoder_input_by_hand():
    batch = pack([EXAMPLE], "decoder")
    assert batch.tokens.shape == (1, 8) and batch.structure.tolist() == STRUCTURE


def test_decoding_numbers_every_output_slot_and_pads_with_zero():
    assert structure_rows([EXAMPLE], [3], "decoder", width=10).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3, 0]]
    assert structure_rows([EXAMPLE], [2], "encoder").tolist() == [[1, 2, 0, 1, 1, 2]]  # one-pass: source, then its slots


def test_structure_rows_refuse_a_mixed_batch_and_an_encoder_decoder():
    plain = Example((1, 2), (2, 1), 2)
    assert structure_rows([plain], [2], "decoder") is None
    with pytest.raises(ValueError, match="some examples of the batch carry structural positions"):
        structure_rows([EXAMPLE, plain], [2, 2], "decoder")
    with pytest.raises(ValueError, match="decoder-only and encoder-only"):
        structure_rows([EXAMPLE], [2], "encoder_decoder")


def ids(model, structure, training=False):
    model.train(training)
    s = torch.tensor(structure)
    return model.positions(torch.ones_like(s), structure=s)


def test_abacus_at_evaluation_gives_digits_their_significance_and_the_rest_zero():
    # McLeish et al.: the index of a digit in its run of digits, from 1; 0 for any other token; k = 0
    assert ids(build("abacus", max_k=7), STRUCTURE).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2]]


def test_abacus_in_training_shifts_every_digit_of_an_example_by_one_k_from_0_to_max_k():
    torch.manual_seed(0)
    rows = ids(build("abacus", max_k=3), STRUCTURE * 400, training=True)
    digits = torch.tensor(STRUCTURE[0]) > 0
    shift = rows[:, digits] - torch.tensor(STRUCTURE[0])[digits]
    assert (rows[:, ~digits] == 0).all()  # non-digits keep id 0
    assert (shift == shift[:, :1]).all()  # one k per example
    assert set(shift[:, 0].tolist()) == {0, 1, 2, 3}  # every k in 0..max_k drawn, none outside


def test_position_coupling_at_evaluation_starts_at_one():
    # Cho et al. with start 1: '+' and '=' (SEP here) at the start, significance i at start + i;
    # the units of 7 5, of 8 and of the answer share id 2, the tens id 3
    assert ids(build("position_coupling", max_position=20), STRUCTURE).tolist() == [[1, 2, 3, 1, 2, 1, 2, 3]]


def test_position_coupling_in_training_draws_one_start_per_example_up_to_max_position():
    torch.manual_seed(0)
    rows = ids(build("position_coupling", max_position=6), STRUCTURE * 400, training=True)
    start = rows - torch.tensor(STRUCTURE[0])  # start = id - s for every token
    assert (start == start[:, :1]).all()
    assert set(start[:, 0].tolist()) == {1, 2, 3, 4}  # 1 .. max_position - max s = 6 - 2
    assert int(rows.max()) == 6


def test_the_embedding_added_is_the_table_row_of_each_id():
    model = build("position_coupling", max_position=9)
    with torch.no_grad():
        model.encoding.table.weight.copy_(torch.arange(10.0)[:, None].expand(10, 32))  # row i = i everywhere
    pos = torch.tensor([[1, 2, 3, 1]])
    out = model.encoding.embed(torch.zeros(1, 4, 32), pos, "decoder")
    assert out[0, :, 0].tolist() == [1.0, 2.0, 3.0, 1.0]


def test_an_id_past_the_table_is_refused_with_both_numbers():
    model = build("abacus", max_k=0, max_position=5)
    with pytest.raises(PositionLimitError, match=r"ids up to 5, but a token at structural position 6 needs id 6"):
        ids(model, [[0, 1, 2, 3, 4, 5, 6]])


def test_without_structural_positions_the_model_says_so():
    model = build("abacus")
    with pytest.raises(StructureError, match="'Abacus' needs the structural positions of its tokens, but none were given"):
        model(torch.ones(1, 5, dtype=torch.long))


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="max_k >= 0"):
        build("abacus", max_k=-1)
    with pytest.raises(ValueError, match="max_position >= 1"):
        build("position_coupling", max_position=0)
