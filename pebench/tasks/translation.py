"""Machine translation with a length split: WMT14 English-German, as in FLOATER (sec. 4.2).

Length is counted in source subword tokens of a joint BPE (:mod:`pebench.tasks.tokenization`).
Training pairs are those whose source length lies in the training range (and whose target is
at most twice the training maximum, which drops misaligned pairs); evaluation buckets partition
the evaluation set (newstest2014 by default, newstest2013 with ``eval_set = "dev"``) by source
length. Offline, the training pairs are the news test sets of the other years plus, optionally,
Tatoeba; ``news_fraction`` of each batch is drawn from the news pairs, since Tatoeba is short
conversational text and the test set is news.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pebench.tasks.base import Example, LengthBucket, Task, held_examples
from pebench.tasks.data import load_wmt14
from pebench.tasks.tokenization import joint_bpe

TARGET_RATIO = 2  # training targets may be at most this many times the longest training source


class WMT14(Task):
    """WMT14 translation, tokenized with a joint BPE trained on the training pairs.

    Args:
        source_lang, target_lang: ``"en"``/``"de"`` in either order.
        vocab_size: BPE vocabulary size.
        tatoeba: add Tatoeba pairs to the offline training data.
        news_fraction: share of training examples drawn from the in-domain news pairs
            (offline data only).
        eval_set: ``"test"`` (newstest2014) or ``"dev"`` (newstest2013).
        max_train_pairs: training pairs taken from the hub's corpora.
        data_dir: the local data folder (None: ``$PEBENCH_DATA``, else the hub).
    Raises:
        DataNotFoundError: when neither a local folder nor the hub provides the data.
    """

    description = "WMT14 En-De news translation, BPE, length split by source subwords"
    reference = "Bojar et al. 2014 (WMT14); Liu et al. 2020, arXiv:2003.09229, sec. 4.2"

    def __init__(
        self,
        source_lang: str = "en",
        target_lang: str = "de",
        vocab_size: int = 8000,
        tatoeba: bool = True,
        news_fraction: float = 0.5,
        eval_set: str = "test",
        max_train_pairs: int = 1_000_000,
        data_dir: Path | None = None,
    ):
        if eval_set not in ("test", "dev"):
            raise ValueError(f"eval_set must be 'test' (newstest2014) or 'dev' (newstest2013); got {eval_set!r}")
        corpus = load_wmt14(source_lang, target_lang, tatoeba, max_train_pairs, data_dir)
        texts = [text for pairs in corpus.train.values() for pair in pairs for text in pair]
        self.tokenizer, tokenizer_path = joint_bpe(texts, vocab_size)
        self.symbols = [token for token, _ in sorted(self.tokenizer.get_vocab().items(), key=lambda item: item[1])]
        self.news_fraction = news_fraction if "news" in corpus.train and len(corpus.train) > 1 else None
        self.train = {name: self._examples(pairs) for name, pairs in corpus.train.items()}
        self.evaluation = self._examples(corpus.test if eval_set == "test" else corpus.dev)
        self.development = self._examples(corpus.dev)
        self.data = {"origin": corpus.origin, "pairs": corpus.counts(), "eval_set": eval_set, "tokenizer": str(tokenizer_path), "vocab_size": len(self.symbols)}

    def _examples(self, pairs) -> list[Example]:
        sources = self.tokenizer.encode_batch([s for s, _ in pairs])
        targets = self.tokenizer.encode_batch([t for _, t in pairs])
        return [Example(tuple(s.ids), tuple(t.ids), len(s.ids), reference=ref) for s, t, (_, ref) in zip(sources, targets, pairs) if s.ids and t.ids]

    def longest_tokens(self, length: int) -> tuple[int, int]:
        return length, TARGET_RATIO * length

    def detokenize(self, symbol_ids) -> str:
        return self.tokenizer.decode(list(symbol_ids))

    def training_examples(self, rng: random.Random, lengths: LengthBucket) -> Iterator[Example]:
        longest_target = self.longest_tokens(lengths.hi or max(e.length for pairs in self.train.values() for e in pairs))[1]
        pools = {name: [e for e in examples if e.length in lengths and len(e.target) <= longest_target] for name, examples in self.train.items()}
        pools = {name: pool for name, pool in pools.items() if pool}
        if not pools:
            raise ValueError(f"no training pair has a source length in {lengths.label}")
        names = list(pools)
        while True:
            yield rng.choice(pools[self._pick(rng, names)])

    def _pick(self, rng: random.Random, names: list[str]) -> str:
        if self.news_fraction is None:
            return rng.choice(names)
        if rng.random() < self.news_fraction:
            return "news"
        return rng.choice([name for name in names if name != "news"])

    def evaluation_examples(self, rng: random.Random, bucket: LengthBucket, n: int) -> list[Example]:
        """The evaluation-set examples in ``bucket``; all of them when ``n`` is 0, else a
        sample of ``n`` drawn with ``rng`` (in the set's order)."""
        return held_examples(self.evaluation, rng, bucket, n)

    def validation_examples(self, rng: random.Random, lengths: LengthBucket, n: int) -> list[Example]:
        """A sample of ``n`` development-set (newstest2013) pairs with source lengths in
        ``lengths``, whichever set is evaluated."""
        return held_examples(self.development, rng, lengths, n)
