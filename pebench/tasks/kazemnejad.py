"""Kazemnejad et al.'s decoder-only suite (issue #39): their task families in the authors'
formats (eight generated here, PCFG from PCFG SET; SCAN in :mod:`pebench.tasks.scan`).

Kazemnejad, Padhi, Natesan Ramamurthy, Das and Reddy 2023, "The Impact of Positional Encoding on
Length Generalization in Transformers" (arXiv:2305.19466, NeurIPS). The families follow the
authors' dataset builders and instance processors (McGill-NLP/length-generalization,
``scripts/dataset_builders/make_*_dataset.py``, ``src/data/data_instance_processor/*``; notes in
docs/kazemnejad-builders.md), where they differ from the paper's text the code:

- the prompt and target strings are theirs, one token per word, digit, punctuation mark (the final
  period apart) and symbol, where the authors use T5's SentencePiece; their ``[SEP]`` (or none,
  where the prompt ends in ``?`` or ``.``) is pebench's SEP, their ``</s>`` its EOS;
- lengths: copy and reverse count tokens (train 2-20, test 21-40); the six math and reasoning
  families use L = 8 (test 9-16) as the authors' runs do (the paper's text says 20), from the
  builders' default minimum (4; 3 for parity; 1 for addition);
- copy draws n tokens from 100 distinct symbols (their ``cmc``), reverse likewise (``mc``), sort
  from 50 (``sngd``), ordered by their index, as the authors order T5 pieces by their place in
  their list; addition draws each operand's digit count on its own, the length being the longer
  (their category is the pair); LEGO draws one query per example
  from its second half, where the builder makes an example of every query of a chain.
- SCAN: the card ``kz_scan`` runs :class:`pebench.tasks.scan.SCAN` on their split (both files
  pooled, at most 25 actions to train on, 26-48 to test), with SCAN's own words and actions (their
  ``Solve:`` prefix and renamed actions change no token's identity);
- PCFG (:class:`KPCFG`): their productivity split of PCFG SET, evaluated on PCFG SET's own
  productivity test (9-35 functions) and held-out pairs of its dev and test sets (1-8); the
  training sources, which PCFG SET's published files lack, come from a generator of the grammar
  fitted to PCFG SET's dev and test sources (how many functions, their binary share, string
  lengths: :data:`PCFG_FUNCTION_COUNTS`, :data:`PCFG_BINARY`, :data:`PCFG_STRING_LENGTHS`; the tree
  shapes are pebench's, not Hupkes et al.'s), each output computed by :func:`interpret`.

PCFG: a source is a composition of string-edit functions applied to strings of symbols, written
in prefix order with ``,`` between the two arguments of a binary function (Hupkes, Dankers, Mul
and Bruni 2020, "Compositionality decomposed", JAIR 67, sec. 3.2); the target is its value.
The ten functions (Hupkes et al. 2020, table 1):
- unary: ``copy`` (x), ``reverse`` (x backwards), ``shift`` (x's first symbol moved to the end),
  ``echo`` (x and its last symbol again), ``swap_first_last`` (x with its first and last symbols
  exchanged), ``repeat`` (x twice);
- binary: ``append`` (x then y), ``prepend`` (y then x), ``remove_first`` (y),
  ``remove_second`` (x).

:func:`interpret` is checked against every pair of PCFG SET's dev and test sets and its
productivity test set (``../shared/data/pcfgset``; tests/tasks/test_kazemnejad.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pebench.tasks.arithmetic import TwoOperands
from pebench.tasks.base import Example, LengthBucket, Task, held_examples
from pebench.tasks.data import DataNotFoundError, data_root
from pebench.tasks.synthetic import SyntheticTask, number

Symbols = tuple[str, ...]

UNARY: dict[str, Callable[[Symbols], Symbols]] = {
    "copy": lambda x: x,
    "reverse": lambda x: x[::-1],
    "shift": lambda x: x[1:] + x[:1],
    "echo": lambda x: x + x[-1:],
    "swap_first_last": lambda x: x if len(x) < 2 else x[-1:] + x[1:-1] + x[:1],
    "repeat": lambda x: x + x,
}
BINARY: dict[str, Callable[[Symbols, Symbols], Symbols]] = {
    "append": lambda x, y: x + y,
    "prepend": lambda x, y: y + x,
    "remove_first": lambda x, y: y,
    "remove_second": lambda x, y: x,
}
SEPARATOR = ","


def interpret(source: Sequence[str]) -> Symbols:
    """The value of a PCFG SET source (its tokens): the composition of string functions it
    writes, applied as it says.

    Raises:
        ValueError: for a source that is not one whole expression (a binary function without its
            separator or second argument, an empty string argument, tokens left over).
    """
    value, end = _expression(tuple(source), 0)
    if end != len(source):
        raise ValueError(f"tokens left after a whole PCFG SET expression, at {end}: {' '.join(source[end:])!r}")
    return value


def _expression(tokens: Symbols, start: int) -> tuple[Symbols, int]:
    """The value of the expression that starts at ``start``, and where it ends."""
    if start >= len(tokens):
        raise ValueError("a PCFG SET expression ends where an argument was expected")
    head = tokens[start]
    if head in UNARY:
        value, end = _expression(tokens, start + 1)
        return UNARY[head](value), end
    if head in BINARY:
        first, end = _expression(tokens, start + 1)
        if end >= len(tokens) or tokens[end] != SEPARATOR:
            raise ValueError(f"the binary function {head!r} at {start} has no ',' before its second argument")
        second, end = _expression(tokens, end + 1)
        return BINARY[head](first, second), end
    end = start
    while end < len(tokens) and tokens[end] != SEPARATOR and tokens[end] not in UNARY and tokens[end] not in BINARY:
        end += 1
    if end == start:
        raise ValueError(f"an empty string argument at {start} of a PCFG SET expression")
    return tokens[start:end], end


Words = list[str]
ANSWER = ["The", "answer", "is"]
DIGITS = [str(d) for d in range(10)]


def number_words(value: int) -> Words:
    """A number as the authors write it (``number_to_string``): its digits one by one, most
    significant first, ``-`` before a negative one."""
    return ["-", *str(-value)] if value < 0 else list(str(value))


def listed(items: Words) -> Words:
    """``[ a , b , c ]``: items between brackets, separated by commas."""
    return ["[", *[word for i, item in enumerate(items) for word in ([","] if i else []) + [item]], "]"]


def distinct_symbols(count: int) -> Words:
    """``count`` distinct symbols, in their order (the authors' list of single T5 pieces)."""
    return [f"w{i}" for i in range(count)]


class PromptTask(SyntheticTask):
    """A task whose examples are a prompt and a target of words (:meth:`words`), made from an
    instance of a given length (:meth:`instance`); the vocabulary is the fixed list
    :attr:`vocabulary`."""

    vocabulary: Words

    def __init__(self):
        self.symbols = list(dict.fromkeys(self.vocabulary))
        self.index = {word: i for i, word in enumerate(self.symbols)}

    def words(self, rng: random.Random, length: int) -> tuple[Words, Words]:
        """The prompt and the target of a random instance of ``length``."""
        raise NotImplementedError

    def sample(self, rng: random.Random, length: int) -> Example:
        prompt, target = self.words(rng, length)
        return Example(tuple(self.index[w] for w in prompt), tuple(self.index[w] for w in target), length)


class KCopy(PromptTask):
    """Copy n symbols drawn from 100 (the authors' ``cmc``): ``Copy: a b c [SEP] a b c``."""

    description = "Copy n symbols (of 100), Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Copy:", *distinct_symbols(100)]

    def words(self, rng, length):
        tokens = [rng.choice(self.vocabulary[1:]) for _ in range(length)]
        return [self.vocabulary[0], *tokens], self.output(tokens)

    def output(self, tokens: Words) -> Words:
        return tokens

    def longest_tokens(self, length):
        return length + 1, length


class KReverse(KCopy):
    """Reverse n symbols drawn from 100 (``mc``): ``Reverse: a b c [SEP] c b a``."""

    description = "Reverse n symbols (of 100), Kazemnejad et al.'s format"
    vocabulary = ["Reverse:", *distinct_symbols(100)]

    def output(self, tokens: Words) -> Words:
        return tokens[::-1]


class KAddition(TwoOperands, PromptTask):
    """``Compute 5 3 7 + 9 1 ? The answer is 6 2 8 .``, digits most significant first; each
    operand's digit count on its own (uniform over the pairs in training), the length the
    longer one's."""

    description = "Add two numbers (digits most significant first), Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Compute", "+", "?", *ANSWER, ".", *DIGITS]

    def example(self, rng: random.Random, digits_a: int, digits_b: int) -> Example:
        a, b = number(rng, digits_a), number(rng, digits_b)
        prompt = ["Compute", *number_words(a), "+", *number_words(b), "?"]
        target = [*ANSWER, *number_words(a + b), "."]
        return Example(tuple(self.index[w] for w in prompt), tuple(self.index[w] for w in target), max(digits_a, digits_b))

    def sample(self, rng, length):
        """An example whose longer operand has ``length`` digits: the pair uniform over those."""
        pair = rng.randrange(2 * length - 1)  # (length, 1..length) then (1..length-1, length)
        return self.example(rng, length, pair + 1) if pair < length else self.example(rng, pair - length + 1, length)

    def longest_tokens(self, length):
        return 2 * length + 3, length + 5


class KPolynomial(PromptTask):
    """``Evaluate at x = - 2 in 3 * x ** 2 + - 1 * x ** 0 ? The answer is 1 .``: n terms,
    coefficients in -3..3, degrees in 0..3, x in -2..2; the value modulo 10 (Python's %, 0..9)."""

    description = "Evaluate a polynomial of n terms modulo 10, Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Evaluate", "at", "x", "=", "in", "*", "**", "+", "-", "?", *ANSWER, ".", *DIGITS]

    def words(self, rng, length):
        x = rng.randint(-2, 2)
        terms = [(rng.randint(-3, 3), rng.randint(0, 3)) for _ in range(length)]
        body = [w for i, (c, d) in enumerate(terms) for w in ([] if i == 0 else ["+"]) + [*number_words(c), "*", "x", "**", *number_words(d)]]
        value = sum(c * x**d for c, d in terms) % 10
        return ["Evaluate", "at", "x", "=", *number_words(x), "in", *body, "?"], [*ANSWER, *number_words(value), "."]

    def longest_tokens(self, length):
        return 7 + 7 * length, 5


class KSort(PromptTask):
    """``Sort the following list [ c , a , b ] . The sorted list is [ a , b , c ] .``: n symbols
    drawn from 50 (``sngd``), sorted by their place in the list of symbols."""

    description = "Sort n symbols (of 50), Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Sort", "the", "following", "list", "[", ",", "]", ".", "The", "sorted", "is", *distinct_symbols(50)]

    def words(self, rng, length):
        ranks = [rng.randrange(50) for _ in range(length)]
        symbols = distinct_symbols(50)
        return ["Sort", "the", "following", "list", *listed([symbols[r] for r in ranks]), "."], [
            "The", "sorted", "list", "is", *listed([symbols[r] for r in sorted(ranks)]), ".",
        ]  # fmt: skip

    def longest_tokens(self, length):
        return 2 * length + 6, 2 * length + 6


class KSummation(PromptTask):
    """``Compute: 3 + 5 + 9 . [SEP] The answer is 7 .``: n values in 1..9, the sum modulo 10."""

    description = "Sum n digits modulo 10, Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Compute:", "+", ".", *ANSWER, *DIGITS]

    def words(self, rng, length):
        values = [rng.randint(1, 9) for _ in range(length)]
        body = [w for i, v in enumerate(values) for w in ([] if i == 0 else ["+"]) + [str(v)]]
        return ["Compute:", *body, "."], [*ANSWER, str(sum(values) % 10), "."]

    def longest_tokens(self, length):
        return 2 * length + 1, 5


class KParity(PromptTask):
    """``Is the number of 1's even in the sequence [ 1 , 0 , 1 , 1 ] ? The answer is No .``: n
    fair bits; Yes when their sum is even."""

    description = "Parity of n bits, Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466"
    vocabulary = ["Is", "the", "number", "of", "1's", "even", "in", "sequence", "[", ",", "]", "?", *ANSWER, "Yes", "No", ".", "0", "1"]

    def words(self, rng, length):
        bits = [rng.randint(0, 1) for _ in range(length)]
        prompt = ["Is", "the", "number", "of", "1's", "even", "in", "the", "sequence", *listed([str(b) for b in bits]), "?"]
        return prompt, [*ANSWER, "Yes" if sum(bits) % 2 == 0 else "No", "."]

    def longest_tokens(self, length):
        return 2 * length + 11, 5


class KLego(PromptTask):
    """``If q = +1 , b = - q , k = + b . Then , what is the value of k ? The answer is -1 .``:
    a chain of n variables (distinct letters), the first set to +1 or -1, each next one equal to
    (+) or the negation of (-) the one before; the query one of the chain's second half
    (variables ceil(n/2) .. n-1, 0-based), as the builder's (Zhang et al. 2022's LEGO)."""

    description = "Resolve a chain of n sign assignments (LEGO), Kazemnejad et al.'s format"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466; Zhang et al. 2022, arXiv:2206.04301"
    LETTERS = [chr(ord("a") + i) for i in range(26)]
    vocabulary = ["If", "=", "+1", "-1", "+", "-", ",", ".", "Then", "what", "is", "the", "value", "of", "?", *ANSWER, *LETTERS]

    def words(self, rng, length):
        if not 2 <= length <= 26:
            raise ValueError(f"a LEGO chain has 2 to 26 variables (distinct letters); got {length}")
        names = rng.sample(self.LETTERS, length)
        bits = [rng.randint(0, 1) for _ in range(length)]
        clauses = [[names[0], "=", "+1" if bits[0] else "-1"]]
        clauses += [[names[i], "=", "+" if bits[i] == bits[i - 1] else "-", names[i - 1]] for i in range(1, length)]
        query = rng.randrange((length + 1) // 2, length)
        chain = [w for i, c in enumerate(clauses) for w in ([","] if i else []) + c]
        prompt = ["If", *chain, ".", "Then", ",", "what", "is", "the", "value", "of", names[query], "?"]
        return prompt, [*ANSWER, "+1" if bits[query] else "-1", "."]

    def longest_tokens(self, length):
        return 5 * length + 9, 5


# PCFG SET's sources, fitted (their dev and test sets, 14,581 sources): how many have 1, ..., 8
# functions, the binary share of the functions (29,816 of 75,071) and the share of each string
# length (2-5 symbols, of 44,397 strings).
PCFG_FUNCTION_COUNTS = {1: 225, 2: 1870, 3: 2827, 4: 2745, 5: 1931, 6: 1495, 7: 967, 8: 740}
PCFG_BINARY = 0.3972
PCFG_STRING_LENGTHS = {2: 0.1593, 3: 0.2970, 4: 0.2770, 5: 0.2667}
PCFG_SYMBOLS = [f"{letter}{number}" for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" for number in range(1, 21)]  # 520


def count_functions(source: Sequence[str]) -> int:
    """The number of function words of a PCFG SET source: its length in Kazemnejad et al.'s split."""
    return sum(word in UNARY or word in BINARY for word in source)


def read_pcfg(folder, name: str) -> list[tuple[Symbols, Symbols]]:
    """(source, target) token pairs of PCFG SET's ``<name>.src`` and ``.tgt`` in ``folder``.

    Raises:
        ValueError: if the two files' line counts differ.
    """
    sources, targets = ((folder / f"{name}.{side}").read_text(encoding="utf-8").splitlines() for side in ("src", "tgt"))
    if len(sources) != len(targets):
        raise ValueError(f"{folder / name}: {len(sources)} sources but {len(targets)} targets")
    return [(tuple(s.split()), tuple(t.split())) for s, t in zip(sources, targets)]


class KPCFG(Task):
    """Kazemnejad et al.'s PCFG task: ``Solve: <source> [SEP] <target>``, the length the number of
    functions of the source (module docstring).

    Data: ``pcfgset/pcfgset/{dev,test}.{src,tgt}`` and ``pcfgset/productivity/test.{src,tgt}`` of
    the local data folder (github.com/i-machine-think/am-i-compositional, data/pcfgset/); no hub
    copy is known, so without them the task says where to put them.

    Args:
        generated_longest: a generated training pair is kept only if its output is no longer than
            PCFG SET's longest at its number of functions (True), so that training sequences stay
            within the lengths the evaluation sets reach.
        data_dir: the local data folder (None: ``$PEBENCH_DATA``).
    Raises:
        DataNotFoundError: without the local files.
    """

    description = "PCFG SET's productivity split: string-edit function compositions, 1-8 functions in training, 9-35 in test"
    reference = "Kazemnejad et al. 2023, arXiv:2305.19466; Hupkes et al. 2020, JAIR 67"

    def __init__(self, generated_longest: bool = True, data_dir: Path | None = None):
        root = data_root(data_dir)
        folder = root / "pcfgset" if root is not None else None
        names = ("pcfgset/dev", "pcfgset/test", "productivity/test")
        if folder is None or not all((folder / f"{name}.{side}").is_file() for name in names for side in ("src", "tgt")):
            raise DataNotFoundError(
                f"PCFG SET is not in {folder or '$PEBENCH_DATA (unset)'}: put pcfgset/{{dev,test}}.{{src,tgt}} and productivity/test.{{src,tgt}} "
                "there (github.com/i-machine-think/am-i-compositional, data/pcfgset/) and pass --data-dir"
            )
        dev, test, productivity = (read_pcfg(folder, name) for name in names)
        self.symbols = ["Solve:", *UNARY, *BINARY, SEPARATOR, *PCFG_SYMBOLS]
        self.index = {word: i for i, word in enumerate(self.symbols)}
        self.pools = {
            "validation": [self.encode(*pair) for pair in dev if count_functions(pair[0]) <= 8],
            "id_test": [self.encode(*pair) for pair in test if count_functions(pair[0]) <= 8],
            "test": [self.encode(*pair) for pair in productivity],
        }
        self.longest = {}
        for source, target in dev + test + productivity:
            n = count_functions(source)
            self.longest[n] = max(self.longest.get(n, 0), len(target))
        self.generated_longest = generated_longest
        self.data = {"origin": f"local:{folder.resolve()}", "pairs": {name: len(pool) for name, pool in self.pools.items()}}

    def encode(self, source: Symbols, target: Symbols) -> Example:
        """A pair as an example: ``Solve:`` and the source, the target; its number of functions."""
        return Example((self.index["Solve:"], *(self.index[w] for w in source)), tuple(self.index[w] for w in target), count_functions(source))

    def longest_tokens(self, length: int) -> tuple[int, int]:
        """Sources: ``Solve:``, the functions, and at most one 5-symbol string and a separator per
        binary function and one more; outputs: PCFG SET's longest at this many functions (its
        longest overall where it has none)."""
        return 1 + length + 6 * length + 5, self.longest.get(length, max(self.longest.values()))

    def generate(self, rng: random.Random, functions: int) -> list[str]:
        """A source with ``functions`` functions, in prefix order: each function binary with
        probability :data:`PCFG_BINARY` (its arguments sharing the remaining functions, split
        uniformly), each string of 2-5 symbols as :data:`PCFG_STRING_LENGTHS`."""
        if functions == 0:
            size = rng.choices(list(PCFG_STRING_LENGTHS), weights=list(PCFG_STRING_LENGTHS.values()))[0]
            return [rng.choice(PCFG_SYMBOLS) for _ in range(size)]
        if rng.random() >= PCFG_BINARY:
            return [rng.choice(list(UNARY)), *self.generate(rng, functions - 1)]
        first = rng.randint(0, functions - 1)
        return [rng.choice(list(BINARY)), *self.generate(rng, first), SEPARATOR, *self.generate(rng, functions - 1 - first)]

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        counts = {n: share for n, share in PCFG_FUNCTION_COUNTS.items() if n in lengths}
        if not counts:
            raise ValueError(f"PCFG SET's training sources have 1-8 functions; none in {lengths.label}")
        while True:
            source = self.generate(rng, rng.choices(list(counts), weights=list(counts.values()))[0])
            target = interpret(source)
            if self.generated_longest and len(target) > self.longest_tokens(count_functions(source))[1]:
                continue
            yield self.encode(tuple(source), target)

    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """PCFG SET's pairs in ``bucket`` (its productivity test past 8 functions, held-out test
        pairs within): all when ``n`` is 0, else ``n`` drawn with ``rng``, in their order."""
        return held_examples(self.pools["id_test"] + self.pools["test"], rng, bucket, n)

    def validation_examples(self, rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
        """PCFG SET's dev pairs of 1-8 functions."""
        return held_examples(self.pools["validation"], rng, lengths, n)
