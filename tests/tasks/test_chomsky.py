"""The Chomsky-hierarchy tasks (Delétang et al. 2023) against their authors' code: hand-made
input/output pairs computed by hand from the code's rules, and properties of samples."""

import math
import random

import pytest
import torch

from pebench.model.batching import BOS, EOS, FIRST_SYMBOL, IGNORE, PLACEHOLDER, SEP, pack, target_tokens
from pebench.config.cards import encoding_card, suite_cards, suite_levels, suite_of, suite_tasks, task_card, task_cards, with_plugin_defaults
from pebench.encodings.nope import NoPE
from pebench.running.evaluation import evaluate
from pebench.model.transformer import ModelConfig
from pebench.config.protocol import resolve
from pebench.tasks import chomsky
from pebench.running.train import set_up

SUITE = list(suite_tasks("chomsky"))


def task(name):
    return resolve(task_card(name)).task


@pytest.mark.parametrize("name, source, target", [
    ("even_pairs", "001110", "0"),  # one 01, one 10: even (the code's docstring)
    ("even_pairs", "0101001", "1"),  # 01 01 10 01 10: 5, odd
    ("parity_check", "1010100", "1"),
    ("parity_check", "01111", "0"),
    ("cycle_navigation", "RLSLL", "3"),  # +1 -1 0 -1 -1 = -2 = 3 mod 5 (the code: actions 0, 1, 2 move -1, 0, +1)
    ("cycle_navigation", "RRRL", "2"),
    ("modular_arithmetic", "1+2*3", "2"),  # 7 mod 5 (the code's docstring examples)
    ("modular_arithmetic", "1-1-1", "4"),
    ("modular_arithmetic", "0*1+4*3-2", "0"),
    ("reverse_string", "011010", "010110"),
    ("duplicate_string", "101", "101101"),
    ("odds_first", "00110101", "01110100"),  # s[1::2] then s[::2]: the code's order, not its docstring's
    ("odds_first", "110", "110"),  # s[1::2] = 1, then s[::2] = 1 0
    ("bucket_sort", "10204112", "00111224"),
    ("compute_sqrt", "100101", "110"),  # 37: floor(sqrt) = 6 = 110, in ceil(6 / 2) = 3 digits
    ("compute_sqrt", "111", "10"),  # 7: 2 = 10 (the code's docstring)
    ("compute_sqrt", "0011", "01"),  # 3: 1, in ceil(4 / 2) = 2 digits, leading zero kept
    ("missing_duplicate_string", "01100_10", "1"),  # 0110 0110 with the second copy's 2nd symbol missing
    ("missing_duplicate_string", "101_01#", "1"),  # odd length: 101 101 and the padding #
    ("missing_duplicate_string", "1", "1"),  # the code's fixed case
])
def test_string_tasks_known_answers(name, source, target):
    assert "".join(task(name).solve(list(source))) == target


@pytest.mark.parametrize("source, target", [
    (["0", "1", "1", "0", "PUSH1", "POP", "POP"], "110"),  # the code's docstring example: 0110, push 1, pop, pop -> 011, top first
    (["1", "1", "0", "POP", "POP", "POP"], ""),  # emptied
    (["1", "POP", "POP", "PUSH0"], "0"),  # a POP on an empty stack does nothing
    (["0"], "0"),  # length 1: a stack of one symbol
])
def test_stack_manipulation_known_answers(source, target):
    assert "".join(task("stack_manipulation").solve(source)) == target


@pytest.mark.parametrize("name, source, target", [
    ("binary_addition", "001+01101", "01011"),  # 4 + 22 = 26 (the code's docstring, termination and padding aside)
    ("binary_addition", "1001+000001", "100101"),  # 9 + 32 = 41
    ("binary_multiplication", "001*01101", "0001101"),  # 4 * 22 = 88
    ("binary_multiplication", "1001*000001", "000001001"),  # 9 * 32 = 288
    ("binary_addition", "01", "01"),  # length 2, no operator: the number itself (2)
    ("binary_multiplication", "01", "0"),  # length 2: the code's fixed [0]
])
def test_binary_arithmetic_known_answers(name, source, target):
    assert "".join(task(name).solve(list(source))) == target


@pytest.mark.parametrize("source, target", [("(1+2)", "3"), ("(-(2*3))", "4"), ("((-4)--2)", "3"), ("(1*(2-4))", "3")])
def test_modular_arithmetic_brackets_known_answers(source, target):
    assert "".join(task("modular_arithmetic_brackets").solve(list(source))) == target


@pytest.mark.parametrize("source, target", [("(x+3)=4", "1"), ("(-x--2)=3", "4"), ("((3-x)+1)=0", "4"), ("00", "0")])
def test_solve_equation_known_answers(source, target):
    assert "".join(task("solve_equation").solve(list(source))) == target


@pytest.mark.parametrize("name", SUITE)
def test_every_length_draws_an_input_of_that_length(name):
    t, rng = task(name), random.Random(0)
    for length in range(1, 60):
        example = t.sample(rng, length)
        expected = length - 1 + length % 2 if name == "modular_arithmetic" else length  # odd, as the code forces it
        assert len(example.source) == expected and example.length == length


def test_arithmetic_labels_are_the_values_of_the_expressions():
    # an independent evaluator: Python's own, on the same strings
    rng = random.Random(1)
    for name in ("modular_arithmetic", "modular_arithmetic_brackets"):
        t = task(name)
        for _ in range(300):
            example = t.sample(rng, rng.randint(1, 40))
            text = "".join(t.symbols[i] for i in example.source)
            assert eval(text) % 5 == int(t.symbols[example.target[0]]), text  # noqa: S307 (digits and + - * ( ) only)
    t = task("solve_equation")
    for _ in range(300):
        example = t.sample(rng, rng.randint(3, 40))
        text = "".join(t.symbols[i] for i in example.source)
        left, value = text.split("=")
        assert eval(left.replace("x", t.symbols[example.target[0]])) % 5 == int(value), text  # noqa: S307


def test_sqrt_and_binary_arithmetic_properties():
    rng = random.Random(2)
    sqrt, addition, product = task("compute_sqrt"), task("binary_addition"), task("binary_multiplication")
    for _ in range(300):
        length = rng.randint(3, 40)
        example = sqrt.sample(rng, length)
        value, root = (int("".join(sqrt.symbols[i] for i in ids), 2) for ids in (example.source, example.target))
        assert root**2 <= value < (root + 1) ** 2 and len(example.target) == math.ceil(length / 2)
        for t, combine in ((addition, lambda n, m: n + m), (product, lambda n, m: n * m)):
            example = t.sample(rng, length)
            text = "".join(t.symbols[i] for i in example.source)
            n, m = (int(part[::-1], 2) for part in text.split(t.operator))
            assert int("".join(t.symbols[i] for i in example.target)[::-1], 2) == combine(n, m)
            assert len(example.target) < example.slots  # room for the termination token


def test_the_one_pass_format_marks_the_end_token_and_masks_what_follows():
    t = task("binary_addition")
    example = t.sample(random.Random(3), 5)  # 5 input symbols, 6 slots
    batch = pack([example], "encoder")
    symbols = [i + FIRST_SYMBOL for i in example.target]
    assert batch.tokens[0].tolist() == [i + FIRST_SYMBOL for i in example.source] + [PLACEHOLDER] * 6
    assert batch.labels[0].tolist() == [IGNORE] * 5 + symbols + [EOS] + [IGNORE] * (6 - len(symbols) - 1)
    assert target_tokens(example, "encoder") == symbols + [EOS]
    reverse = task("reverse_string").sample(random.Random(3), 4)  # no end token: every slot is a symbol
    assert target_tokens(reverse, "encoder") == [i + FIRST_SYMBOL for i in reverse.target]
    assert pack([reverse], "encoder").labels[0].tolist()[4:] == [i + FIRST_SYMBOL for i in reverse.target]


def test_the_suite_has_the_papers_fifteen_tasks_with_their_levels():
    # Delétang et al. 2023, table 1: 4 regular, 4 deterministic context-free, 7 context-sensitive tasks
    levels = suite_levels("chomsky")
    assert {level: len(tasks) for level, tasks in levels.items()} == {"regular": 4, "dcf": 4, "cs": 7}
    assert len(SUITE) == 15 and set(SUITE) <= set(task_cards())
    assert all(type(task(name)).__module__ == chomsky.__name__ for name in SUITE)


def test_every_task_belongs_to_one_suite_at_most_and_every_listed_task_has_a_card():
    listed = [name for suite in suite_cards() for name in suite_tasks(suite)]
    assert len(listed) == len(set(listed)) and set(listed) <= set(task_cards())
    assert suite_of("copy") == "synthetic" and suite_of("bucket_sort") == "chomsky" and suite_of("wmt_long") == "real"


@pytest.mark.parametrize("name", SUITE)
def test_the_longest_output_bounds_every_sample_and_is_reached(name):
    # Hand-stated bounds (chomsky.py): one class 1, duplicate_string 2n, compute_sqrt ceil(n/2),
    # the others n; every sampled output fits, and some output reaches the bound at a length.
    tasks = task(name)
    rng, reached = random.Random(3), False
    for length in range(1, 41):
        longest_source, longest_target = tasks.longest_tokens(length)
        targets = [len(tasks.sample(rng, length).target) for _ in range(60)]
        assert max(targets) <= longest_target, f"{name} at {length}: an output of {max(targets)} > {longest_target}"
        reached |= max(targets) == longest_target
    assert reached


class CorrectNextToken(torch.nn.Module):
    """A stand-in decoder-only model that always emits the correct next token: it looks the
    prompt (``BOS source SEP``) up among the examples it was given and continues with their
    target and EOS. Driven through pebench's greedy decoding with its caps."""

    def __init__(self, examples):
        super().__init__()
        self.encoding = NoPE(ModelConfig().geometry(8))
        self.gold = {(BOS, *(s + FIRST_SYMBOL for s in e.source), SEP): target_tokens(e, "decoder") for e in examples}
        self.vocab = FIRST_SYMBOL + 8

    def batch_positions(self, lengths, width, identity, stack, structure=None):
        return self.encoding.batch_positions(lengths, width, identity, stack)  # as Transformer.batch_positions

    def decode(self, tokens, pos, cache, memory=None):
        rows = cache["rows"] = [old + new for old, new in zip(cache.get("rows", [[]] * len(tokens)), tokens.tolist())]
        logits = torch.zeros(len(rows), tokens.shape[1], self.vocab)
        for i, row in enumerate(rows):
            if SEP in row:  # past its prompt: the next token of its gold output
                prompt, written = tuple(row[: row.index(SEP) + 1]), row[row.index(SEP) + 1 :]
                gold = self.gold[prompt]
                logits[i, -1, gold[len(written)] if len(written) < len(gold) else EOS] = 1.0
        return logits


@pytest.mark.parametrize("name", SUITE)
def test_the_correct_next_token_scores_one_on_every_task_in_decoder_format(name):
    # The decoding cap never stops a right answer: duplicate_string's 2n + 1 tokens exceed the
    # card's default cap 1.5 (n + 1) + 10 from n = 23 on (the cap comes from the task now).
    card = task_card(name)
    card["model"]["architecture"] = "decoder"
    card["split"]["eval_examples"] = 1  # per length
    protocol = resolve(card)
    sets = protocol.evaluation_sets()
    protocol.check_output_caps({bucket.label: examples for bucket, examples in sets.items()})
    model = CorrectNextToken([e for examples in sets.values() for e in examples])
    entries, scores = evaluate(model, protocol, sets, torch.device("cpu"))
    assert scores.id == scores.ood == {"sequence_accuracy": 1.0, "exact_match": 1.0}
    assert all(entry.capped == 0 for entry in entries)


def test_a_decoding_cap_below_a_gold_output_is_refused_before_training(monkeypatch):
    monkeypatch.setattr(chomsky.DuplicateString, "longest_output", lambda self, length: length)  # understated: n, not 2n
    card = task_card("duplicate_string")
    card["model"]["architecture"] = "decoder"
    protocol = resolve(card)
    with pytest.raises(ValueError, match=r"task 'duplicate_string': a gold output at length 23 \(bucket 1-40\) has 47 tokens with EOS, "
                                         r"but decoding stops at 46; no model could score on it"):
        set_up(protocol, with_plugin_defaults(encoding_card("nope")), seed=0)
