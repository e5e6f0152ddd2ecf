"""A score does not depend on how the evaluation batches its examples: randomized positions are
drawn for each example at its own length, seeded by the example."""

import dataclasses

import pytest
import torch

from pebench.config.cards import encoding_card, task_card, with_plugin_defaults
from pebench.running.evaluation import scorer_for
from pebench.config.protocol import resolve
from pebench.core.registry import ENCODINGS, plugins
from pebench.running.train import set_up, train
from tests.helpers import BUILT_IN_ENCODINGS, DETERMINISTIC, build, relative_error

BATCH_SIZES = (1, 4, 16, 250)


def trained(task: str, encoding: str, steps: int, **split):
    """The task card's protocol (its split changed by ``split``) and a model trained ``steps`` steps."""
    card = task_card(task)
    card["split"].update(split)
    card["training"].update(steps=steps, eval_every=steps, target=None)
    protocol = resolve(card)
    setup = set_up(protocol, with_plugin_defaults(encoding_card(encoding)), seed=0)
    train(setup.model, protocol, 0, torch.device("cpu"), setup.validation[:8], progress=False)
    return protocol, setup


def scores_by_batch_size(protocol, setup):
    """Per evaluation batch size: the ID bucket's scores, per length, and each example's."""
    bucket, examples = next(iter(setup.sets.items()))
    found = {}
    for size in BATCH_SIZES:
        sized = dataclasses.replace(protocol, training=dataclasses.replace(protocol.training, eval_batch_size=size))
        entry, scored = scorer_for(sized).bucket(setup.model, bucket, 0, examples, torch.device("cpu"))
        found[size] = (entry.metrics, entry.lengths, scored)
    return found


@pytest.mark.parametrize("task, encoding, split", [
    ("bucket_sort", "randomized", {"eval_examples": 2}),  # encoder-only: one pass
    ("copy", "randomized_sinusoidal", {"eval_examples": 48}),  # decoder-only: greedy, cached
])
def test_a_bucket_scores_the_same_at_every_evaluation_batch_size(task, encoding, split):
    protocol, setup = trained(task, encoding, steps=60, **split)
    found = scores_by_batch_size(protocol, setup)
    reference = found[BATCH_SIZES[-1]]
    assert 0 < reference[0][protocol.primary] < 1  # a model that is neither blank nor perfect: scores that can move
    for size in BATCH_SIZES[:-1]:
        assert found[size] == reference, f"batch size {size} scores differ from batch size {BATCH_SIZES[-1]}"


def test_each_example_draws_positions_at_its_own_length_whatever_its_batch():
    protocol, setup = trained("bucket_sort", "randomized", steps=1)
    model = setup.model.eval()
    short, long = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[5, 6, 7, 8, 0, 0], [9, 4, 5, 6, 7, 8]])
    long[0, 4:] = 0  # the short example, right-padded beside a longer one
    with torch.random.fork_rng():
        torch.manual_seed(7)
        alone = model.positions(short)
        batched = model.positions(long)
    assert alone.shape == (1, 4) and batched.shape == (2, 6)
    assert torch.equal(batched[0, :4], alone[0])  # its own draw, not the prefix of a longer one
    assert torch.equal(batched[0, 4:], torch.zeros(2, dtype=torch.long))  # padding at position 0
    assert not torch.equal(batched[1, :4], alone[0])  # another example draws its own


PER_EXAMPLE = [name for name in BUILT_IN_ENCODINGS if plugins(ENCODINGS)[name].per_example_positions]


@pytest.mark.parametrize("name", PER_EXAMPLE)
@pytest.mark.parametrize("architecture", ["decoder", "encoder_decoder", "encoder"])
def test_per_example_positions_give_each_row_what_its_own_positions_give_it(name, architecture):
    # The hooks of an encoding that states per_example_positions take pos [b, s]: row i must come
    # out as if the batch were row i alone at positions pos[i].
    model = build(name, architecture, max_length=64, **DETERMINISTIC.get(name, {})).eval()
    if model.encoding.needs_structure and architecture == "encoder_decoder":
        pytest.skip("structural positions serve decoder-only and encoder-only models")
    tokens = torch.randint(4, 20, (3, 7), generator=torch.Generator().manual_seed(0))
    source = torch.randint(4, 20, (3, 5), generator=torch.Generator().manual_seed(1)) if architecture == "encoder_decoder" else None
    structure = torch.zeros_like(tokens)  # read only by an encoding that needs structural positions, whose draw is replaced below
    drawn = torch.stack([torch.randperm(60, generator=torch.Generator().manual_seed(i))[:7].sort().values for i in range(3)])  # [3, 7]
    model.encoding.batch_positions = lambda lengths, width, identity, stack, structure=None: drawn[:, :width]
    with torch.no_grad():
        together = model(tokens, source, structure=structure)
        for i in range(3):
            model.encoding.batch_positions = lambda lengths, width, identity, stack, structure=None, i=i: drawn[i, :width]
            alone = model(tokens[i : i + 1], source[i : i + 1] if source is not None else None, structure=structure[i : i + 1])
            assert relative_error(together[i : i + 1], alone) < 1e-5, f"{name}: row {i} with per-example positions"


def test_randomized_refuses_a_base_that_takes_no_per_example_positions():
    with pytest.raises(ValueError, match=r"base 'relative' \(Relative\) cannot take .*per_example_positions is False"):
        build("randomized", base="relative")


def test_randomized_refuses_a_base_that_takes_its_positions_from_the_task():
    with pytest.raises(ValueError, match=r"base 'abacus' \(Abacus\) takes its positions from the task's structural positions; choose another base"):
        build("randomized", base="abacus")
