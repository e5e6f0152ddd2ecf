"""Kazemnejad et al.'s suite: the PCFG SET interpreter against hand-worked values and against
every pair PCFG SET publishes (dev, test, productivity test); the eight generated families."""

import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest

from pebench.tasks.base import LengthBucket
from pebench.tasks.kazemnejad import (
    BINARY, PCFG_BINARY, PCFG_FUNCTION_COUNTS, PCFG_STRING_LENGTHS, PCFG_SYMBOLS, UNARY, KAddition, KCopy, KLego, KParity, KPCFG, KPolynomial, KReverse,
    KSort, KSummation, count_functions, interpret, number_words,
)
from tests.pebench_command import TINY, pebench

PCFGSET = Path(os.environ.get("PEBENCH_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")) / "pcfgset"


def test_each_function_by_hand():
    x, y = ("A", "B", "C"), ("D", "E")
    assert interpret("copy A B C".split()) == x and interpret("reverse A B C".split()) == ("C", "B", "A")
    assert interpret("shift A B C".split()) == ("B", "C", "A") and interpret("echo A B C".split()) == ("A", "B", "C", "C")
    assert interpret("swap_first_last A B C".split()) == ("C", "B", "A") and interpret("swap_first_last A".split()) == ("A",)
    assert interpret("repeat D E".split()) == y + y
    assert interpret("append A B C , D E".split()) == x + y and interpret("prepend A B C , D E".split()) == y + x
    assert interpret("remove_first A B C , D E".split()) == y and interpret("remove_second A B C , D E".split()) == x
    # Nested, in prefix order: shift(reverse(copy(M2 H16 K3 Z20))) = shift(Z20 K3 H16 M2) = K3 H16 M2 Z20,
    # then swap_first_last: Z20 H16 M2 K3 (PCFG SET's dev.src, line 1).
    assert interpret("swap_first_last shift reverse copy M2 H16 K3 Z20".split()) == ("Z20", "H16", "M2", "K3")
    # A binary function's first argument may itself be binary: append(append(A, B), C).
    assert interpret("append append A , B , C".split()) == ("A", "B", "C")


def test_a_malformed_source_is_refused_with_where():
    with pytest.raises(ValueError, match="the binary function 'append' at 0 has no ','"):
        interpret("append A B".split())
    with pytest.raises(ValueError, match="an empty string argument at 1"):
        interpret("reverse , A".split())
    with pytest.raises(ValueError, match="ends where an argument was expected"):
        interpret("reverse".split())


@pytest.mark.skipif(not PCFGSET.is_dir(), reason=f"PCFG SET is not at {PCFGSET} ($PEBENCH_DATA/pcfgset, else ../shared/data/pcfgset)")
@pytest.mark.parametrize("split", ["pcfgset/dev", "pcfgset/test", "productivity/test"])
def test_the_interpreter_reproduces_every_published_pair(split):
    sources = (PCFGSET / f"{split}.src").read_text().splitlines()
    targets = (PCFGSET / f"{split}.tgt").read_text().splitlines()
    assert len(sources) == len(targets) > 4000
    wrong = [(s, t) for s, t in zip(sources, targets) if " ".join(interpret(s.split())) != t]
    assert not wrong, f"{len(wrong)} of {len(sources)} differ, e.g. {wrong[0]}"


# The eight generated families: each example's answer recomputed from its prompt's words by a
# route of its own (Python's arithmetic on the prompt's text, a walk of the LEGO chain), lengths
# and token bounds checked on many draws, and hand-worked values.

FAMILIES = [KCopy, KReverse, KAddition, KPolynomial, KSort, KSummation, KParity, KLego]


def words(task, example):
    return [task.symbols[i] for i in example.source], [task.symbols[i] for i in example.target]


def answer(target):
    """The words after 'The answer is', before the final period."""
    assert target[:3] == ["The", "answer", "is"] and target[-1] == "."
    return target[3:-1]


def test_numbers_are_written_digit_by_digit_as_the_authors_do():
    assert number_words(-12) == ["-", "1", "2"] and number_words(307) == ["3", "0", "7"]


def operands(prompt):
    """The two numbers of an addition prompt ``Compute a + b ?``, as digit strings."""
    return "".join(prompt[1 : prompt.index("+")]), "".join(prompt[prompt.index("+") + 1 : -1])


class Scripted(random.Random):
    """A random source that answers randint, randrange and sample with the values given, in order."""

    def __init__(self, *values):
        super().__init__(0)
        self.values = list(values)

    def randint(self, a, b):
        return self.values.pop(0)

    def randrange(self, *args):
        return self.values.pop(0)

    def sample(self, population, k):
        return self.values.pop(0)


def test_a_polynomial_by_hand():
    # The authors' example: x = -2, 3 x^2 + (-1) x^0 = 12 - 1 = 11, modulo 10: 1.
    prompt, target = KPolynomial().words(Scripted(-2, 3, 2, -1, 0), 2)
    assert " ".join(prompt) == "Evaluate at x = - 2 in 3 * x ** 2 + - 1 * x ** 0 ?" and " ".join(target) == "The answer is 1 ."


def test_a_lego_chain_by_hand():
    # q = +1 (bit 1), b = - q (bit 0), k = + b (bit 0): k = -1 (the authors' example), query k (index 2).
    prompt, target = KLego().words(Scripted(["q", "b", "k"], 1, 0, 0, 2), 3)
    assert " ".join(prompt) == "If q = +1 , b = - q , k = + b . Then , what is the value of k ?" and " ".join(target) == "The answer is -1 ."


def test_parity_and_summation_by_hand():
    # bits 1 0 1 1: three 1s, odd: No; 3 + 5 + 9 = 17: 7.
    assert " ".join(KParity().words(Scripted(1, 0, 1, 1), 4)[1]) == "The answer is No ."
    prompt, target = KSummation().words(Scripted(3, 5, 9), 3)
    assert " ".join(prompt) == "Compute: 3 + 5 + 9 ." and " ".join(target) == "The answer is 7 ."


def resolve(prompt):
    """The queried LEGO variable's value, walking the chain clause by clause."""
    clauses, query = " ".join(prompt[1 : prompt.index(".")]).split(" , "), prompt[-2]
    values = {}
    for clause in clauses:
        name, _, *rest = clause.split()
        values[name] = int(rest[0]) if len(rest) == 1 else (values[rest[1]] if rest[0] == "+" else -values[rest[1]])
    return "+1" if values[query] > 0 else "-1"


def check(task, example):
    """Recompute the example's target from its prompt, by family."""
    prompt, target = words(task, example)
    if isinstance(task, KReverse):
        assert prompt[0] == "Reverse:" and target == prompt[1:][::-1]
    elif isinstance(task, KCopy):
        assert prompt[0] == "Copy:" and target == prompt[1:]
    elif isinstance(task, KAddition):
        a, b = operands(prompt)
        assert "".join(answer(target)) == str(int(a) + int(b)) and example.length == max(len(a), len(b))
    elif isinstance(task, KPolynomial):
        x = int("".join(prompt[4 : prompt.index("in")]))
        expression = "".join(prompt[prompt.index("in") + 1 : -1])  # e.g. 3*x**2+-1*x**0
        assert "".join(answer(target)) == str(eval(expression, {"x": x}) % 10)  # noqa: S307 - our own generated text
        assert expression.count("*x**") == example.length
    elif isinstance(task, KSort):
        items = [w for w in prompt[prompt.index("[") + 1 : prompt.index("]")] if w != ","]
        listed_target = [w for w in target[target.index("[") + 1 : target.index("]")] if w != ","]
        assert listed_target == sorted(items, key=lambda w: int(w[1:])) and len(items) == example.length
    elif isinstance(task, KSummation):
        values = [int(w) for w in prompt[1:-1] if w != "+"]
        assert answer(target) == [str(sum(values) % 10)] and len(values) == example.length
    elif isinstance(task, KParity):
        bits = [w for w in prompt if w in ("0", "1")]
        assert answer(target) == ["Yes" if bits.count("1") % 2 == 0 else "No"] and len(bits) == example.length
    elif isinstance(task, KLego):
        assert answer(target) == [resolve(prompt)] and prompt.count("=") == example.length


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_every_example_is_right_in_its_bucket_and_within_the_stated_token_bounds(family):
    task, rng = family(), random.Random(0)
    for bucket in (LengthBucket(4, 8), LengthBucket(9, 16)):
        for example in task.evaluation_examples(rng, bucket, 160):
            check(task, example)
            assert example.length in bucket
            longest_source, longest_target = task.longest_tokens(example.length)
            assert len(example.source) <= longest_source and len(example.target) <= longest_target


def test_addition_trains_on_every_pair_and_tests_every_pair_of_a_length():
    task = KAddition()
    def cell(example):
        return tuple(len(number) for number in operands(words(task, example)[0]))

    stream = task.training_examples(random.Random(0), LengthBucket(1, 3))
    assert set(Counter(cell(next(stream)) for _ in range(600))) == {(i, j) for i in range(1, 4) for j in range(1, 4)}
    cells = Counter(cell(e) for e in task.evaluation_examples(random.Random(0), LengthBucket(3, 3), 500))
    assert set(cells) == {(3, 1), (3, 2), (3, 3), (1, 3), (2, 3)} and min(cells.values()) > 70  # uniform over the 5 pairs


def test_lego_queries_the_second_half_of_its_chain():
    task = KLego()
    queried = Counter(words(task, task.sample(random.Random(seed), 6))[0][-2] for seed in range(200))
    assert len(queried) > 10  # letters shuffled per example
    positions = set()
    for seed in range(200):
        prompt, _ = words(task, task.sample(random.Random(seed), 6))
        names = [prompt[i - 1] for i, w in enumerate(prompt) if w == "="]
        positions.add(names.index(prompt[-2]))
    assert positions == {3, 4, 5}  # ceil(6/2) .. 5


def test_the_suite_is_listed_and_one_of_its_tasks_runs_end_to_end(tmp_path):
    listed = pebench("list")
    assert all(f"kazemnejad  kz_{name}" in listed.stdout for name in ("copy", "reverse", "addition", "polynomial", "sort", "summation", "parity", "lego"))
    out = pebench("run", "--encoding", "nope", "--task", "kz_lego", "--results", str(tmp_path), *TINY)
    assert out.returncode == 0, out.stderr
    record = json.loads(next((tmp_path / "runs" / "kz_lego" / "nope").glob("seed0*.json")).read_text())
    assert record["status"] == "ok" and [b["bucket"] for b in record["buckets"]] == ["4-8", "9-12", "13-16"]


# PCFG: the generator's fitted numbers recomputed from PCFG SET's files, the sources it makes
# (exactly the functions asked for, PCFG SET's symbols and string lengths, parsed back by the
# interpreter that reproduces every published pair), their spread over 1-8 functions against the
# data's, and the evaluation pools.
needs_pcfgset = pytest.mark.skipif(not PCFGSET.is_dir(), reason=f"PCFG SET is not at {PCFGSET}")


def strings_of(source):
    """The lengths of the symbol strings of a source."""
    runs, run = [], 0
    for word in [*source, ","]:
        if word in UNARY or word in BINARY or word == ",":
            runs += [run] if run else []
            run = 0
        else:
            run += 1
    return runs


@needs_pcfgset
def test_the_fitted_numbers_are_pcfgsets_own():
    sources = [line.split() for name in ("dev", "test") for line in (PCFGSET / "pcfgset" / f"{name}.src").read_text().splitlines()]
    counts = Counter(count_functions(s) for s in sources)
    assert {n: counts[n] for n in range(1, 9)} == PCFG_FUNCTION_COUNTS
    binary = sum(w in BINARY for s in sources for w in s) / sum(count_functions(s) for s in sources)
    assert binary == pytest.approx(PCFG_BINARY, abs=1e-4)
    lengths = Counter(n for s in sources for n in strings_of(s))
    assert {n: c / sum(lengths.values()) for n, c in lengths.items()} == pytest.approx(PCFG_STRING_LENGTHS, abs=1e-4)
    assert {w for s in sources for w in s if w not in UNARY and w not in BINARY and w != ","} == set(PCFG_SYMBOLS)


@needs_pcfgset
def test_pcfg_training_sources_follow_the_data_and_parse(monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(PCFGSET.parent))
    task = KPCFG()
    assert task.data["pairs"] == {"validation": 4249, "id_test": 8551, "test": 11333}
    for n in (1, 4, 8):
        source = task.generate(random.Random(n), n)
        assert count_functions(source) == n and set(strings_of(source)) <= {2, 3, 4, 5}
        interpret(source)  # one whole expression, or ValueError
    stream = task.training_examples(random.Random(0), LengthBucket(1, 8))
    drawn = [next(stream) for _ in range(4000)]
    spread = Counter(e.length for e in drawn)
    total = sum(PCFG_FUNCTION_COUNTS.values())
    assert {n: spread[n] / 4000 for n in range(1, 9)} == pytest.approx({n: c / total for n, c in PCFG_FUNCTION_COUNTS.items()}, abs=0.025)
    example = drawn[0]
    words = [task.symbols[i] for i in example.source]
    assert words[0] == "Solve:" and tuple(task.symbols[i] for i in example.target) == interpret(words[1:])
    assert all(len(e.target) <= task.longest_tokens(e.length)[1] and len(e.source) <= task.longest_tokens(e.length)[0] for e in drawn)
    ood = task.evaluation_examples(random.Random(0), LengthBucket(17, 35), 50)
    assert len(ood) == 50 and all(17 <= e.length <= 35 for e in ood)


def test_pcfg_without_its_files_says_where_to_put_them(monkeypatch, tmp_path):
    from pebench.tasks.data import DataNotFoundError

    monkeypatch.setenv("PEBENCH_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"put pcfgset/\{dev,test\}.\{src,tgt\} and productivity/test.\{src,tgt\} there"):
        KPCFG()
