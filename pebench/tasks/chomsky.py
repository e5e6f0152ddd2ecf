"""The Chomsky-hierarchy tasks of Delétang et al. 2023, "Neural Networks and the Chomsky
Hierarchy" (ICLR, arXiv:2207.02098), as Ruoss et al. 2023 reuse them for randomized positional
encodings (arXiv:2305.16843).

Each family generates what the authors' code generates (google-deepmind/
neural_networks_chomsky_hierarchy and google-deepmind/randomized_positional_encodings,
``tasks/{regular,dcf,cs}/*.py`` and the task parameters of ``experiments/constants.py``), from a
seeded ``random.Random`` instead of JAX's and NumPy's generators: the same distributions, other
draws. Where the code and its docstrings disagree, pebench follows the code:
- ``odds_first`` outputs the symbols at odd 0-based indices first, then those at even ones
  (``s[1::2] + s[::2]``), where the docstring's example puts the even ones first;
- ``cycle_navigation``'s actions 0, 1, 2 move by -1, 0, +1 (the docstring says 0 stays);
- ``modular_arithmetic`` drops an even length to the odd length below (an expression is
  number (op number)*);
- the length of an arithmetic example counts every symbol, brackets and operators included;
- ``stack_manipulation``, ``binary_addition`` and ``binary_multiplication`` end their output
  with a termination token, after which the authors pad with zeros and mask the accuracy:
  pebench's target stops before it and the encoder-only format gives those tasks the authors'
  number of output slots (``output_slots``): EOS stands for the termination token and what
  follows is not scored (:mod:`pebench.model.batching`);
- ``missing_duplicate_string`` of length 1, ``solve_equation`` of length 1 or 2 and
  ``binary_addition``/``binary_multiplication`` of length 1 or 2 are the code's fixed
  degenerate cases.
Outputs of one class (the regular tasks, ``modular_arithmetic_brackets``, ``solve_equation``,
``missing_duplicate_string``) are a target of one symbol.
The task parameters are the authors' defaults: modulus 5 (with multiplication in
``modular_arithmetic_brackets``, without in ``solve_equation``), binary strings for
``reverse_string``, ``duplicate_string`` and ``odds_first``, 5 symbols in ``bucket_sort``.
"""

from __future__ import annotations

import math
import random

from pebench.tasks.base import Example
from pebench.tasks.synthetic import SyntheticTask

BINARY = ("0", "1")


def _digits(modulus: int) -> list[str]:
    return [str(d) for d in range(modulus)]


class ChomskyTask(SyntheticTask):
    """A task of the suite: :meth:`draw` an input of a given length as the authors' code does,
    :meth:`solve` it (the output is a function of the input), written in :attr:`symbols`."""

    reference = "Delétang et al. 2023, arXiv:2207.02098"
    symbols: list[str]

    def draw(self, rng: random.Random, length: int) -> list[str]:
        raise NotImplementedError

    def solve(self, source: list[str]) -> list[str]:
        raise NotImplementedError

    def output_slots(self, length: int) -> int | None:
        """The authors' output length when it is not the target's own (a task with an end token)."""
        return None

    def longest_output(self, length: int) -> int:
        """The most output symbols an input of ``length`` can have (default: ``length``)."""
        return length

    def longest_tokens(self, length: int) -> tuple[int, int]:
        return length, self.longest_output(length)

    def sample(self, rng: random.Random, length: int) -> Example:
        source = self.draw(rng, length)
        index = {symbol: i for i, symbol in enumerate(self.symbols)}
        return Example(tuple(index[s] for s in source), tuple(index[s] for s in self.solve(source)), length, output_slots=self.output_slots(length))


class OneClass(ChomskyTask):
    """A task whose output is one class: one symbol."""

    def longest_output(self, length: int) -> int:
        return 1


class BinaryString(ChomskyTask):
    """A task on a uniform string over :attr:`symbols` (binary unless the class says)."""

    symbols = list(BINARY)

    def draw(self, rng: random.Random, length: int) -> list[str]:
        return [rng.choice(self.symbols) for _ in range(length)]


# ---- regular ---------------------------------------------------------------------------------


class EvenPairs(OneClass, BinaryString):
    """Is the number of unequal neighbouring pairs (01 and 10) of a binary string even (0) or odd (1)?"""

    description = "Regular: parity of the number of 01 and 10 pairs of a binary string"

    def solve(self, source):
        return [str(sum(a != b for a, b in zip(source, source[1:])) % 2)]


class ModularArithmetic(OneClass):
    """The value mod 5 of ``n (op n)*`` with op in +, -, *, evaluated with the usual precedence
    (the code multiplies out the terms between + and -, a minus negating its term). An even
    length drops to the odd one below."""

    description = "Regular: value mod 5 of an expression of + - * without brackets"

    def __init__(self, modulus: int = 5):
        self.modulus = modulus
        self.symbols = [*_digits(modulus), "+", "-", "*"]

    def draw(self, rng, length):
        length -= 1 - length % 2  # odd, as the code forces it
        expression = [str(rng.randrange(self.modulus))]
        for _ in range(length // 2):
            expression += [rng.choice("+-*"), str(rng.randrange(self.modulus))]
        return expression

    def solve(self, source):
        return [str(evaluate(source) % self.modulus)]


class ParityCheck(OneClass, BinaryString):
    """Is the number of 1s of a binary string even (0) or odd (1)?"""

    description = "Regular: parity of the number of 1s of a binary string"

    def solve(self, source):
        return [str(source.count("1") % 2)]


class CycleNavigation(OneClass):
    """The final position on a cycle of 5 from 0 after moves L (-1), S (0) and R (+1)."""

    description = "Regular: final position on a 5-cycle after a sequence of left, stay and right moves"
    MOVES = {"L": -1, "S": 0, "R": 1}  # the code's actions 0, 1, 2

    def __init__(self, cycle_length: int = 5):
        self.cycle_length = cycle_length
        self.symbols = [*_digits(cycle_length), *self.MOVES]

    def draw(self, rng, length):
        return [rng.choice(list(self.MOVES)) for _ in range(length)]

    def solve(self, source):
        return [str(sum(self.MOVES[m] for m in source) % self.cycle_length)]


# ---- deterministic context-free --------------------------------------------------------------


class StackManipulation(ChomskyTask):
    """A binary stack (bottom to top) then actions POP, PUSH0, PUSH1; the output is the final
    stack top to bottom (a POP on an empty stack does nothing), then the termination token. The
    code's split: the stack takes 1..length-1 symbols (length 1: one symbol, no action)."""

    description = "DCF: execute POP/PUSH actions on a binary stack, output it top to bottom"
    symbols = [*BINARY, "POP", "PUSH0", "PUSH1"]

    def draw(self, rng, length):
        if length == 1:
            return [rng.choice(BINARY)]
        stack = [rng.choice(BINARY) for _ in range(rng.randint(1, length - 1))]
        return stack + [rng.choice(["POP", "PUSH0", "PUSH1"]) for _ in range(length - len(stack))]

    def solve(self, source):
        actions = next((i for i, s in enumerate(source) if s not in BINARY), len(source))
        stack = list(source[:actions])
        for action in source[actions:]:
            if action != "POP":
                stack.append(action[-1])
            elif stack:
                stack.pop()
        return stack[::-1]

    def output_slots(self, length):
        return length + 1


class ReverseString(BinaryString):
    """A binary string reversed."""

    description = "DCF: reverse a binary string"

    def solve(self, source):
        return source[::-1]


class ModularArithmeticBrackets(OneClass):
    """The value mod 5 of a bracketed expression of + - * drawn as the authors' recursive
    ``generate_one_expression_and_result``: length 1 d, 2 -d, 3 (d), 4 (-d), longer (L op R)
    with L of 1..length-4 symbols."""

    description = "DCF: value mod 5 of a bracketed expression of + - *"

    def __init__(self, modulus: int = 5, mult: bool = True):
        self.modulus, self.mult = modulus, mult
        self.symbols = [*_digits(modulus), "+", "-", "*", "(", ")"]

    def draw(self, rng, length):
        return list(bracketed_expression(rng, length, self.modulus, "+-*" if self.mult else "+-"))

    def solve(self, source):
        return [str(evaluate(source) % self.modulus)]


def bracketed_expression(rng: random.Random, length: int, modulus: int, operators: str) -> str:
    """An expression of exactly ``length`` symbols (the authors' recursion; see
    :class:`ModularArithmeticBrackets`)."""
    if length <= 4:  # d, -d, (d), (-d)
        text = "-" * (length in (2, 4)) + str(rng.randrange(modulus))
        return f"({text})" if length >= 3 else text
    left = rng.randint(1, length - 4)
    left_text = bracketed_expression(rng, left, modulus, operators)
    right_text = bracketed_expression(rng, length - left - 3, modulus, operators)
    return f"({left_text}{rng.choice(operators)}{right_text})"


def evaluate(expression) -> int:
    """The integer value of an expression of digits, +, -, *, brackets and unary minus, with the
    usual precedence (what the authors' generators compute).

    Raises:
        ValueError: for a malformed expression.
    """
    tokens = list(expression)
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def take(expected=None):
        nonlocal position
        token = peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"malformed expression {''.join(tokens)!r} at symbol {position}")
        position += 1
        return token

    def factor():
        if peek() == "-":
            take()
            return -factor()
        if peek() == "(":
            take()
            value = total()
            take(")")
            return value
        token = take()
        if not token.isdigit():
            raise ValueError(f"malformed expression {''.join(tokens)!r}: {token!r} where a number goes")
        return int(token)

    def term():
        value = factor()
        while peek() == "*":
            take()
            value *= factor()
        return value

    def total():
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    value = total()
    if position != len(tokens):
        raise ValueError(f"malformed expression {''.join(tokens)!r}: {tokens[position]!r} left over")
    return value


class SolveEquation(OneClass):
    """The digit x that solves ``expression = value`` mod 5: an expression of length - 2 symbols
    (:func:`bracketed_expression`, + and - only, so x is unique) with one digit made x, the first
    digit at or after a uniformly drawn symbol (cyclically), as the code does. Lengths 1 and 2:
    the code's all-0 input and output."""

    description = "DCF: solve a bracketed linear equation mod 5 for x"

    def __init__(self, modulus: int = 5):
        self.modulus = modulus
        self.symbols = [*_digits(modulus), "+", "-", "(", ")", "x", "="]

    def draw(self, rng, length):
        if length < 3:
            return ["0"] * length
        expression = bracketed_expression(rng, length - 2, self.modulus, "+-")
        index = rng.randrange(len(expression))
        while not expression[index].isdigit():
            index = (index + 1) % len(expression)
        value = evaluate(expression) % self.modulus
        return list(expression[:index] + "x" + expression[index + 1 :] + "=" + str(value))

    def solve(self, source):
        if "x" not in source:
            return ["0"]
        left, value = source[: source.index("=")], int(source[-1])
        [x] = [x for x in _digits(self.modulus) if evaluate([x if s == "x" else s for s in left]) % self.modulus == value]
        return [x]


# ---- context-sensitive -----------------------------------------------------------------------


class DuplicateString(BinaryString):
    """A binary string written twice."""

    description = "CS: write a binary string twice"

    def solve(self, source):
        return source + source

    def longest_output(self, length):
        return 2 * length


class MissingDuplicateString(OneClass):
    """A binary string of length // 2 written twice, one symbol replaced by ``_`` (and ``#``
    after it when the length is odd); the output is the missing symbol. Length 1: input 1,
    output 1 (the code's fixed case)."""

    description = "CS: the symbol missing from a duplicated binary string"
    symbols = [*BINARY, "_", "#"]

    def draw(self, rng, length):
        if length == 1:
            return ["1"]
        half = [rng.choice(BINARY) for _ in range(length // 2)]
        doubled = half + half
        doubled[rng.randrange(len(doubled))] = "_"
        return doubled + ["#"] * (length % 2)

    def solve(self, source):
        if len(source) == 1:
            return ["1"]
        half = len(source) // 2
        gap = source.index("_")
        return [source[gap + half if gap < half else gap - half]]


class OddsFirst(BinaryString):
    """A binary string's symbols at odd (0-based) indices, then those at even ones (the code's
    order; see the module docstring)."""

    description = "CS: a binary string's odd-index symbols, then its even-index ones"

    def solve(self, source):
        return source[1::2] + source[::2]


def little_endian(number: int, width: int = 0) -> list[str]:
    """Binary digits of ``number``, least significant first, padded with zeros to ``width``."""
    return list(f"{number:b}".zfill(width)[::-1])


def from_little_endian(bits) -> int:
    return int("".join(bits)[::-1], 2)


class BinaryArithmetic(ChomskyTask):
    """``n OP m`` in little-endian binary, n and m of 1.. digits splitting length - 1 (leading
    zeros kept), the output the result in little-endian binary without leading zeros, then the
    termination token. Lengths 1 and 2 hold one number, no operator: the code's fixed cases."""

    operator: str

    def __init__(self):
        self.symbols = [*BINARY, self.operator]

    def combine(self, n: int, m: int) -> int:
        raise NotImplementedError

    def degenerate(self, bits: list[str]) -> list[str]:
        raise NotImplementedError

    def draw(self, rng, length):
        if length <= 2:
            return little_endian(rng.randrange(2**length - 1), length)  # the code's np.random.randint(0, 2**length - 1)
        width_n = rng.randint(1, length - 2)
        width_m = length - 1 - width_n
        return little_endian(rng.randint(1, 2**width_n - 1), width_n) + [self.operator] + little_endian(rng.randint(1, 2**width_m - 1), width_m)

    def solve(self, source):
        if self.operator not in source:
            return self.degenerate(source)
        split = source.index(self.operator)
        return little_endian(self.combine(from_little_endian(source[:split]), from_little_endian(source[split + 1 :])))


class BinaryAddition(BinaryArithmetic):
    description = "CS: add two little-endian binary numbers"
    operator = "+"

    def combine(self, n, m):
        return n + m

    def degenerate(self, bits):
        return little_endian(from_little_endian(bits))

    def output_slots(self, length):
        return length + 1


class BinaryMultiplication(BinaryArithmetic):
    description = "CS: multiply two little-endian binary numbers"
    operator = "*"

    def combine(self, n, m):
        return n * m

    def degenerate(self, bits):
        return ["0"] * (len(bits) - 1)

    def output_slots(self, length):
        return length

    def longest_output(self, length):
        return length - 1  # a product of a + b = length - 1 bits at most


class ComputeSqrt(BinaryString):
    """floor(sqrt(n)) of n in 1..2^length - 1, both big-endian binary with leading zeros: n in
    length digits, the root in ceil(length / 2)."""

    description = "CS: floor of the square root of a big-endian binary number"

    def draw(self, rng, length):
        return list(f"{rng.randint(1, 2**length - 1):b}".zfill(length))

    def solve(self, source):
        return list(f"{math.isqrt(int(''.join(source), 2)):b}".zfill(math.ceil(len(source) / 2)))

    def longest_output(self, length):
        return math.ceil(length / 2)


class BucketSort(BinaryString):
    """A string over 5 symbols, sorted."""

    description = "CS: sort a string over 5 symbols"

    def __init__(self, vocab_size: int = 5):
        self.symbols = _digits(vocab_size)

    def solve(self, source):
        return sorted(source)
