"""The long_addition family (McLeish et al. 2024's format): examples, structural positions and
the evaluation grid, checked by hand and by an independent route; an encoding that needs
structural positions refused on a task without them; an end-to-end run that records the grid."""

import json
import random
from collections import Counter

import pytest

from pebench.tasks.arithmetic import LongAddition, digits, significance
from pebench.tasks.base import LengthBucket
from tests.pebench_command import TINY, pebench, pebench_here

PLUS = 10


def value(reversed_digits) -> int:
    """The number whose digits, least significant first, are ``reversed_digits`` (by hand)."""
    return sum(d * 10**i for i, d in enumerate(reversed_digits))


def test_digits_and_significance_by_hand():
    assert digits(507) == (7, 0, 5) and digits(0) == (0,)
    assert significance(3) == (1, 2, 3)


def test_an_example_is_its_operands_reversed_with_the_sum_and_each_digits_significance():
    example = LongAddition().example(random.Random(3), 4, 2)
    plus = example.source.index(PLUS)
    a, b = example.source[:plus], example.source[plus + 1 :]
    assert (len(a), len(b)) == (4, 2) == example.cell and example.length == 4
    assert a[-1] != 0 and b[-1] != 0  # exactly 4 and 2 digits: no leading zero
    assert value(example.target) == value(a) + value(b)  # the label recomputed by another route
    assert example.structure == (1, 2, 3, 4, 0, 1, 2)


def test_training_draws_each_operand_length_on_its_own_inside_the_training_range():
    stream = LongAddition().training_examples(random.Random(0), LengthBucket(1, 3))
    cells = Counter(next(stream).cell for _ in range(900))
    assert set(cells) == {(i, j) for i in range(1, 4) for j in range(1, 4)}  # all nine, the diagonal not favoured
    assert min(cells.values()) > 60


def test_evaluation_puts_half_of_each_length_on_the_diagonal_and_spreads_the_rest_over_the_grid():
    task = LongAddition(grid=[1, 2, 5])
    examples = task.evaluation_examples(random.Random(0), LengthBucket(5, 5), 8)
    # at length 5 the other cells of the grid with max(len a, len b) = 5: (1,5), (2,5), (5,1), (5,2)
    assert Counter(e.cell for e in examples) == {(5, 5): 4, (1, 5): 1, (2, 5): 1, (5, 1): 1, (5, 2): 1}
    assert all(e.length == 5 and value(e.target) == value(e.source[: e.cell[0]]) + value(e.source[e.cell[0] + 1 :]) for e in examples)


def test_a_length_off_the_grid_is_refused():
    with pytest.raises(ValueError, match=r"grid \[1, 2, 5\]; length 3 is not in it"):
        LongAddition(grid=[1, 2, 5]).evaluation_examples(random.Random(0), LengthBucket(3, 3), 2)
    with pytest.raises(ValueError, match="ascending distinct"):
        LongAddition(grid=[3, 2])


def test_an_encoding_that_needs_structural_positions_is_refused_on_copy_before_training(tmp_path, capsys):
    out = pebench_here(capsys, "run", "--encoding", "abacus", "--task", "copy", "--results", str(tmp_path))
    assert out.returncode == 2
    assert "encoding 'abacus' needs the structural positions of its task's tokens, but task 'copy' cannot give them: it supplies none" in out.stderr
    assert not list(tmp_path.rglob("*.json"))  # nothing trained, no record


def test_a_run_on_long_addition_records_the_score_of_every_grid_cell(tmp_path):
    small = ["--set", "params.grid=[1,2,3,4]", "--set", "split.train=[1,2]", "--set", "split.buckets=[[1,2],[3,4]]"]
    out = pebench("run", "--encoding", "position_coupling", "--task", "long_addition", "--results", str(tmp_path), *TINY, *small)
    assert out.returncode == 0, out.stderr
    [path] = (tmp_path / "runs" / "long_addition" / "position_coupling").glob("seed0*.json")
    record = json.loads(path.read_text())
    cells = {tuple(c["cell"]): c["n"] for bucket in record["buckets"] for c in bucket["cells"]}
    # every length has 20 examples: 10 on the diagonal, 10 over its other cells
    assert cells[(4, 4)] == 10 and cells[(1, 1)] == 20 and sum(cells.values()) == 80
    assert set(cells) == {(i, j) for i in range(1, 5) for j in range(1, 5)}


@pytest.mark.parametrize("encoding, seed, init_std", [("abacus", 0, 4.0), ("position_coupling", 1, 16.0)])
def test_greedy_decoding_gives_each_output_token_the_structural_position_teacher_forcing_gives_it(encoding, seed, init_std):
    # An untrained model's greedy outputs (its position table scaled up, so that they vary), read back in one pass after the prompt with structural
    # positions written by hand (BOS 0, the source's, SEP 0, then 1, 2, ... for the outputs), must
    # be its argmax at every output position: decoding gives the k-th generated token k.
    import torch

    from pebench.model.batching import BOS, FIRST_SYMBOL, SEP
    from pebench.config.cards import encoding_card, task_card
    from pebench.running.evaluation import predict
    from pebench.config.protocol import resolve
    from pebench.running.train import build_model

    protocol = resolve(task_card("long_addition"))
    examples = protocol.task.evaluation_examples(random.Random(0), LengthBucket(5, 15, 5), 12)
    torch.manual_seed(seed)
    card = encoding_card(encoding)
    card["params"]["init_std"] = init_std  # position embeddings large beside the tokens': each output depends on where it is
    model = build_model(protocol, card, 64, 40).eval()
    generated = predict(model, protocol, examples, torch.device("cpu")).tokens
    assert len({token for tokens in generated for token in tokens}) > 5  # digits, not one token again and again
    for example, tokens in zip(examples, generated):
        prompt = [BOS, *(s + FIRST_SYMBOL for s in example.source), SEP]
        read = torch.tensor([prompt + tokens[:-1]])
        structure = torch.tensor([[0, *example.structure, 0, *range(1, len(tokens))]])
        with torch.no_grad():
            argmax = model(read, structure=structure).argmax(-1)[0]
        assert argmax[len(prompt) - 1 :].tolist() == tokens  # the SEP's row predicts the first output token
