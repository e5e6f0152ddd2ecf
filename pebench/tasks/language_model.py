"""Language modelling with a length split: train on windows of L tokens, score the held-out text
with longer contexts (Press et al. 2022, "Train Short, Test Long", arXiv:2108.12409, sec. 2-3).

A family provides a token stream split three ways: *train* (windows of the training length are
drawn from it at random offsets), *validation* (the ID validation text, held out from the
training part) and *evaluation* (the test text, scored at every evaluation length by
:mod:`pebench.running.perplexity`). Examples are windows: ``source`` holds L + 1 tokens, the model reads
the first L and predicts each next one; ``target`` is empty.

- ``tinyshakespeare`` (:class:`TinyShakespeare`): characters of the tiny-shakespeare corpus
  (Karpathy's char-rnn) from the local data folder, split as nanoGPT does: the first 90% for
  training (its last 5% held out as the validation text), the last 10% for evaluation.
- ``wikitext103`` (:class:`WikiText103`): WikiText-103 (raw) from the Hugging Face hub,
  ``datasets.load_dataset("wikitext", "wikitext-103-raw-v1")``, in byte-level BPE tokens
  (:mod:`pebench.tasks.tokenization`) learned on the first ``bpe_lines`` training lines: its train,
  validation and test splits.
"""

from __future__ import annotations

from pathlib import Path

from pebench.tasks.base import TokenStream
from pebench.tasks.data import DataNotFoundError, data_root, from_hub
from pebench.tasks.tokenization import joint_bpe

SHAKESPEARE = "tinyshakespeare/input.txt"


class LanguageModel(TokenStream):
    """A token stream split three ways (see the module docstring).

    Args:
        eval_tokens: how many tokens of the evaluation text are scored (from its start; 0: all).
        stride: tokens each window scores in the sliding-window evaluation (Press et al.'s S;
            Hugging Face's strided perplexity).
    Raises:
        ValueError: for a stride or eval_tokens below 1 (0 for all tokens).
    """

    def __init__(self, eval_tokens: int = 32768, stride: int = 64):
        if stride < 1 or eval_tokens < 0:
            raise ValueError(f"a language-model task needs stride >= 1 and eval_tokens >= 0 (0: the whole text); got {stride} and {eval_tokens}")
        self.eval_tokens, self.stride = eval_tokens, stride

    def split(self, train: list[int], validation: list[int], evaluation: list[int]) -> None:
        self.train_ids, self.validation_ids = train, validation
        self.evaluation_ids = evaluation[: self.eval_tokens] if self.eval_tokens else evaluation


class TinyShakespeare(LanguageModel):
    """Characters of tiny-shakespeare, split 90/10 (the last 5% of the 90% held out for validation).

    Args:
        eval_tokens, stride: see :class:`LanguageModel`.
        data_dir: the local data folder (None: ``$PEBENCH_DATA``).
    Raises:
        DataNotFoundError: without a data folder or the text in it.
    """

    description = "Character-level language modelling on tiny-shakespeare"
    reference = "Karpathy 2015 (char-rnn); Press et al. 2022, arXiv:2108.12409"

    def __init__(self, eval_tokens: int = 32768, stride: int = 64, data_dir: Path | None = None):
        super().__init__(eval_tokens, stride)
        root = data_root(data_dir)
        text = _local_text(root, SHAKESPEARE)
        self.symbols = sorted(set(text))
        index = {character: i for i, character in enumerate(self.symbols)}
        ids = [index[character] for character in text]
        cut = int(0.9 * len(ids))
        held_out = cut - int(0.05 * cut)
        self.split(ids[:held_out], ids[held_out:cut], ids[cut:])
        self.data = {
            "origin": f"local:{root.resolve()}/{SHAKESPEARE}",
            "characters": len(ids),
            "tokens": {"train": held_out, "validation": cut - held_out, "evaluation": len(self.evaluation_ids)},
        }


def _local_text(root: Path | None, relative: str) -> str:
    """The text of ``root / relative``.

    Raises:
        DataNotFoundError: without a data folder (``root`` None) or the file, saying how to point
            pebench at one.
    """
    if root is None or not (root / relative).is_file():
        where = f"{root / relative} is missing" if root is not None else "no data folder is set (--data-dir or $PEBENCH_DATA)"
        raise DataNotFoundError(
            f"tiny-shakespeare not found: {where}. Download input.txt of karpathy/char-rnn "
            f"(data/tinyshakespeare/) into <folder>/{relative} and pass --data-dir <folder>"
        )
    return (root / relative).read_text(encoding="utf-8")


class WikiText103(LanguageModel):
    """WikiText-103 (raw) from the Hugging Face hub in byte-level BPE tokens.

    Args:
        vocab_size: BPE vocabulary size.
        bpe_lines: training lines the BPE is learned on (the first ones).
        eval_tokens, stride: see :class:`LanguageModel`.
    Raises:
        DataNotFoundError: when the hub cannot be reached (no local copy is read).
    """

    description = "Language modelling on WikiText-103 (hub), byte-level BPE"
    reference = "Merity et al. 2017, arXiv:1609.07843; Press et al. 2022, arXiv:2108.12409"

    def __init__(self, vocab_size: int = 8000, bpe_lines: int = 200_000, eval_tokens: int = 65536, stride: int = 256):
        super().__init__(eval_tokens, stride)
        splits = _wikitext_hub()
        tokenizer, path = joint_bpe(splits["train"][:bpe_lines], vocab_size)
        self.symbols = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
        streams = {name: [i for encoding in tokenizer.encode_batch(lines) for i in encoding.ids] for name, lines in splits.items()}
        self.split(streams["train"], streams["validation"], streams["test"])
        self.data = {
            "origin": "hub:wikitext/wikitext-103-raw-v1",
            "tokenizer": str(path),
            "vocab_size": len(self.symbols),
            "tokens": {name: len(ids) for name, ids in streams.items()},
        }


def _wikitext_hub() -> dict[str, list[str]]:
    """The non-empty lines of WikiText-103 raw's train, validation and test splits, from the hub.

    Raises:
        DataNotFoundError: when the hub fails.
    """

    def hub():
        from datasets import load_dataset

        return load_dataset("wikitext", "wikitext-103-raw-v1")

    dataset = from_hub("WikiText-103", None, hub)
    return {name: [line for line in dataset[name]["text"] if line.strip()] for name in ("train", "validation", "test")}
