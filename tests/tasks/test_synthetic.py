import random
from collections import Counter

import pytest

from pebench.model.batching import BOS, EOS, FIRST_SYMBOL, IGNORE, SEP, pack
from pebench.config.cards import task_card
from pebench.config.protocol import resolve
from pebench.tasks.base import Example, LengthBucket
from pebench.tasks.synthetic import Addition, Copy, Reverse, Sort


def test_outputs_are_the_named_function_of_the_input():
    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(1, 20)
        source = Copy().sample(rng, n).source
        assert Copy().transform(source) == source
        assert Reverse().transform(source) == tuple(reversed(source))
        assert list(Sort().transform(source)) == sorted(source)


def test_addition_known_answer():
    task = Addition()
    example = task.sample(random.Random(3), 5)
    digits = "".join(task.symbols[i] for i in example.source)
    a, b = digits.split("+")
    total = "".join(task.symbols[i] for i in example.target)
    assert int(a[::-1]) + int(b[::-1]) == int(total[::-1])  # written least-significant first
    assert max(len(a), len(b)) == example.length == 5


def test_evaluation_examples_spread_evenly_over_the_buckets_lengths():
    examples = Copy().evaluation_examples(random.Random(0), LengthBucket(17, 32), 200)  # 16 lengths: 12 or 13 each
    counts = Counter(e.length for e in examples)
    assert sorted(counts) == list(range(17, 33)) and set(counts.values()) == {12, 13} and sum(counts.values()) == 200
    assert all(len(e.source) == e.length for e in examples)


def test_evaluation_sets_are_identical_for_every_run():
    first, second = resolve(task_card("copy")).evaluation_sets(), resolve(task_card("copy")).evaluation_sets()
    assert first == second
    assert [len(v) for v in first.values()] == [192] * 4


def test_the_validation_set_lies_at_the_training_lengths_and_is_not_the_id_bucket():
    protocol = resolve(task_card("copy"))
    validation, test = protocol.validation_set(), protocol.evaluation_sets()[protocol.buckets[0]]
    assert len(validation) == 160 and {e.length for e in validation} == set(range(1, 17))
    assert validation == resolve(task_card("copy")).validation_set()  # its own fixed seed
    long_ones = lambda examples: {e.source for e in examples if e.length >= 8}  # noqa: E731  (short strings repeat by chance)
    assert not long_ones(validation) & long_ones(test)


def test_unbounded_bucket_is_refused_for_generators():
    with pytest.raises(ValueError, match="bounded length buckets"):
        Copy().evaluation_examples(random.Random(0), LengthBucket(5, None), 3)


def test_packing_decoder_only():
    batch = pack([Example((0, 1), (1, 0), 2), Example((2,), (2,), 1)], "decoder")
    a, b, c = FIRST_SYMBOL, FIRST_SYMBOL + 1, FIRST_SYMBOL + 2
    assert batch.tokens.tolist() == [[BOS, a, b, SEP, b, a], [BOS, c, SEP, c, 0, 0]]
    assert batch.labels.tolist() == [[IGNORE, IGNORE, IGNORE, b, a, EOS], [IGNORE, IGNORE, c, EOS, IGNORE, IGNORE]]
    assert batch.source is None


def test_packing_encoder_decoder():
    batch = pack([Example((0, 1), (1,), 2)], "encoder_decoder")
    a, b = FIRST_SYMBOL, FIRST_SYMBOL + 1
    assert batch.source.tolist() == [[a, b, EOS]]
    assert batch.tokens.tolist() == [[BOS, b]]
    assert batch.labels.tolist() == [[b, EOS]]
