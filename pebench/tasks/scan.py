"""SCAN's length split (Lake and Baroni 2018, "Generalization without Systematicity", ICML,
arXiv:1711.00350, experiment 2): commands such as "jump around left twice" to action sequences,
trained on outputs of at most 22 actions and tested on 24 to 48.

Length is the number of output actions. The test file is the OOD evaluation set; the training
file is split by a fixed seed into training pairs (90%), the ID validation pairs scored during
training (5%) and the ID evaluation bucket's pairs (5%), so that neither is trained on.
Kazemnejad et al. 2023 (arXiv:2305.19466) run it decoder-only with greedy decoding and exact
match, as pebench's card does. Their own split (``resplit_at = 25``; their
``make_scan_dataset.py``) pools SCAN's length-split training and test files and cuts the pool by
output length: at most 25 actions to train on, 26-48 to test.

Data: ``scan/tasks_{train,test}_length.txt`` of the local data folder (``IN: ... OUT: ...`` per
line, as the authors' repository brendenlake/SCAN ships them), else the Hugging Face hub,
``datasets.load_dataset("scan", "length")``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pebench.tasks.base import Example, LengthBucket, Task, held_examples
from pebench.tasks.data import DataNotFoundError, data_root, from_hub

Pair = tuple[str, str]


def read_pairs(text: str) -> list[Pair]:
    """(command, actions) pairs of SCAN's ``IN: ... OUT: ...`` lines."""
    pairs = []
    for line in text.splitlines():
        if line.strip():
            command, _, actions = line.strip().removeprefix("IN: ").partition(" OUT: ")
            pairs.append((command, actions))
    return pairs


def load_scan(data_dir: Path | None = None) -> tuple[list[Pair], list[Pair], str]:
    """SCAN's length split from the local data folder (:func:`pebench.tasks.data.data_root` of
    ``data_dir``), else the hub: training pairs, test pairs, where they came from.

    Raises:
        DataNotFoundError: when neither the local folder nor the hub has them.
    """
    root = data_root(data_dir)
    if root is not None:
        files = [root / "scan" / f"tasks_{name}_length.txt" for name in ("train", "test")]
        if not all(path.is_file() for path in files):
            raise DataNotFoundError(
                f"{root} lacks {files[0].relative_to(root)} or {files[1].relative_to(root)} (SCAN's length split, "
                f"from github.com/brendenlake/SCAN, length_split/)"
            )
        train, test = (read_pairs(path.read_text(encoding="utf-8")) for path in files)
        return train, test, f"local:{(root / 'scan').resolve()}"

    def hub():
        from datasets import load_dataset

        return load_dataset("scan", "length")

    splits = from_hub("SCAN", "scan/tasks_train_length.txt and scan/tasks_test_length.txt (github.com/brendenlake/SCAN, length_split/)", hub)
    pairs = {name: list(zip(splits[name]["commands"], splits[name]["actions"])) for name in ("train", "test")}
    return pairs["train"], pairs["test"], "hub:scan/length"


class SCAN(Task):
    """SCAN's length split (see the module docstring).

    Args:
        held_out: share of the training file kept out of training, half for validation, half
            for the ID evaluation bucket.
        split_seed: the seed of that split.
        resplit_at: None for SCAN's own length split; else the longest output (actions) of the
            training pairs of a split made anew from SCAN's two files pooled, the longer pairs
            being the test pairs (Kazemnejad et al.'s 25).
        data_dir: the local data folder (None: ``$PEBENCH_DATA``, else the hub).
    Raises:
        DataNotFoundError: from :func:`load_scan`.
    """

    description = "SCAN length split: commands to action sequences, trained on <= 22 actions, tested on 24-48"
    reference = "Lake and Baroni 2018, arXiv:1711.00350; Kazemnejad et al. 2023, arXiv:2305.19466"

    def __init__(self, held_out: float = 0.1, split_seed: int = 0, resplit_at: int | None = None, data_dir: Path | None = None):
        if not 0 < held_out < 1:
            raise ValueError(f"held_out must lie in (0, 1); got {held_out}")
        if resplit_at is not None and resplit_at < 1:
            raise ValueError(f"resplit_at is the longest output (actions) of the training pairs, at least 1; got {resplit_at}")
        train, test, origin = load_scan(data_dir)
        if resplit_at is not None:
            pooled = train + test
            train = [pair for pair in pooled if len(pair[1].split()) <= resplit_at]
            test = [pair for pair in pooled if len(pair[1].split()) > resplit_at]
        self.symbols = sorted({word for command, _ in train + test for word in command.split()}) + sorted(
            {action for _, actions in train + test for action in actions.split()}
        )
        order = list(range(len(train)))
        random.Random(split_seed).shuffle(order)
        cut = int(held_out * len(train))
        self.pools = {
            "train": [self._example(train[i]) for i in sorted(order[cut:])],
            "validation": [self._example(train[i]) for i in sorted(order[: cut // 2])],
            "id_test": [self._example(train[i]) for i in sorted(order[cut // 2 : cut])],
            "test": [self._example(pair) for pair in test],
        }
        self.data = {"origin": origin, "pairs": {name: len(pool) for name, pool in self.pools.items()}}

    def _example(self, pair: Pair) -> Example:
        index = {symbol: i for i, symbol in enumerate(self.symbols)}
        command, actions = (text.split() for text in pair)
        return Example(tuple(index[w] for w in command), tuple(index[a] for a in actions), len(actions))

    def longest_tokens(self, length: int) -> tuple[int, int]:
        return max(len(e.source) for e in self.pools["train"]), length

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        pool = [e for e in self.pools["train"] if e.length in lengths]
        if not pool:
            raise ValueError(f"no SCAN training pair has an output length in {lengths.label}")
        while True:
            yield rng.choice(pool)

    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """The test file's pairs in ``bucket`` (the held-out ID pairs for lengths SCAN trains on):
        all when ``n`` is 0, else ``n`` drawn with ``rng``, in their order."""
        return held_examples(self.pools["test"] + self.pools["id_test"], rng, bucket, n)

    def validation_examples(self, rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
        return held_examples(self.pools["validation"], rng, lengths, n)
