"""Where real task data comes from: a local folder, else the Hugging Face hub.

The local folder is ``--data-dir`` or ``$PEBENCH_DATA``, laid out like pebench's shared data:
``wmt_newstest_en_de/newstestYYYY.{en,de}`` (line-aligned raw text) and
``tatoeba_deu_eng/deu.txt.gz`` (``English<TAB>German``). Without a local folder, WMT14 is
loaded with ``datasets.load_dataset("wmt14", "de-en")``.

Every hub load goes through :func:`from_hub`: when the hub cannot be reached at all (no network),
it says so at once with the local layout to use instead, rather than after the hub client's
retries (27 s of them for SCAN).
"""

from __future__ import annotations

import gzip
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlparse

DATA_ENV = "PEBENCH_DATA"
NEWS = "wmt_newstest_en_de"
TATOEBA = "tatoeba_deu_eng"
# WMT14 uses newstest2013 as its dev set and newstest2014 as its test set; every other year
# of the news test sets is in-domain training data when the WMT14 training corpora are absent.
NEWS_TRAINING_SETS = (
    "news-test2008",
    "newssyscomb2009",
    "newstest2009",
    "newstest2010",
    "newstest2011",
    "newstest2012",
    "newstest2015",
    "newstest2016",
    "newstest2017",
    "newstest2018",
    "newstest2019",
    "newstest2020",
)

Pair = tuple[str, str]


class DataNotFoundError(FileNotFoundError):
    """No usable copy of a dataset; the message says where pebench looked and how to point it at data."""


@dataclass
class TranslationCorpus:
    """Sentence pairs (source, target) by role. ``train`` maps a training source's name
    (``news``, ``tatoeba``, ``wmt14``) to its pairs."""

    origin: str
    train: dict[str, list[Pair]] = field(default_factory=dict)
    dev: list[Pair] = field(default_factory=list)
    test: list[Pair] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {**{f"train_{name}": len(pairs) for name, pairs in self.train.items()}, "dev": len(self.dev), "test": len(self.test)}


HUB_PROBE_SECONDS = 3.0
Loaded = TypeVar("Loaded")


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether a TCP connection to the Hugging Face hub's endpoint (``$HF_ENDPOINT`` or the
    default) opens within ``timeout`` seconds; True in the hub clients' offline mode
    (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``), where they read their cache instead."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return True
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def from_hub(what: str, layout: str | None, load: Callable[[], Loaded]) -> Loaded:
    """``load()`` (a ``datasets`` call) when there is no local folder.

    Raises:
        DataNotFoundError: naming ``what``, why the hub gave nothing, and ``layout``: the files
            to put under a folder passed as ``--data-dir`` (or ``$PEBENCH_DATA``) instead (None:
            the dataset has no local layout, only the hub and its cache).
    """
    if layout is None:
        instead = "It is read from the hub only, or from the hub client's cache (HF_DATASETS_OFFLINE=1)."
    else:
        instead = f"Put {layout} under a folder and pass it: `--data-dir FOLDER` or `export {DATA_ENV}=FOLDER`."
    if not hub_reachable():
        raise DataNotFoundError(
            f"{what} not found: no local folder was given (--data-dir or ${DATA_ENV}) and the Hugging Face hub cannot be reached from here. {instead}"
        )
    try:
        return load()
    except Exception as error:  # no cache, hub refused, dataset gone: all end the same way
        raise DataNotFoundError(
            f"{what} not found: no local folder was given (--data-dir or ${DATA_ENV}) and the Hugging Face hub "
            f"failed ({type(error).__name__}: {str(error)[:200]}). {instead}"
        ) from error


def data_root(data_dir: Path | None = None) -> Path | None:
    """The local data folder: ``data_dir`` (the command's ``--data-dir``) when given, else
    ``$PEBENCH_DATA`` when set, else None (the hub). The one place that reads ``$PEBENCH_DATA``."""
    root = data_dir if data_dir is not None else os.environ.get(DATA_ENV)
    return Path(root).expanduser() if root else None


def _lines(path: Path) -> list[str]:
    """Lines split on newline only: str.splitlines would also split inside sentences at the
    Unicode separators (U+0085, U+2028) that some news sentences contain."""
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def _read_news(folder: Path, name: str, source: str, target: str) -> list[Pair]:
    src, tgt = _lines(folder / f"{name}.{source}"), _lines(folder / f"{name}.{target}")
    if len(src) != len(tgt):
        raise ValueError(f"{folder / name}: {len(src)} {source} lines but {len(tgt)} {target} lines")
    return [(s.strip(), t.strip()) for s, t in zip(src, tgt) if s.strip() and t.strip()]


def _read_tatoeba(path: Path, source: str) -> list[Pair]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        rows = [line.rstrip("\n").split("\t")[:2] for line in file if "\t" in line]
    return [(en, de) if source == "en" else (de, en) for en, de in rows]


def wmt14_local(root: Path, source: str, target: str, tatoeba: bool) -> TranslationCorpus:
    """WMT14 En-De from a local folder (see the module docstring).

    Raises:
        DataNotFoundError: naming the missing files.
    """
    news = root / NEWS
    needed = [news / f"{name}.{lang}" for name in (*NEWS_TRAINING_SETS, "newstest2013", "newstest2014") for lang in (source, target)]
    if tatoeba:
        needed.append(root / TATOEBA / "deu.txt.gz")
    missing = [str(path) for path in needed if not path.is_file()]
    if missing:
        raise DataNotFoundError(
            f"{DATA_ENV}={root} lacks {len(missing)} WMT files, e.g. {missing[0]}; the folder must hold "
            f"{NEWS}/newstestYYYY.{{en,de}}{f' and {TATOEBA}/deu.txt.gz' if tatoeba else ''} (as pebench's shared data does)"
        )
    corpus = TranslationCorpus(origin=f"local:{root.resolve()}")
    corpus.train["news"] = [pair for name in NEWS_TRAINING_SETS for pair in _read_news(news, name, source, target)]
    if tatoeba:
        corpus.train["tatoeba"] = _read_tatoeba(root / TATOEBA / "deu.txt.gz", source)
    corpus.dev = _read_news(news, "newstest2013", source, target)
    corpus.test = _read_news(news, "newstest2014", source, target)
    return corpus


def wmt14_hub(source: str, target: str, max_train_pairs: int) -> TranslationCorpus:
    """WMT14 de-en from the Hugging Face hub: the training corpora (the first
    ``max_train_pairs``), newstest2013 (validation) and newstest2014 (test)."""
    from datasets import load_dataset

    splits = load_dataset("wmt14", "de-en", split=[f"train[:{max_train_pairs}]", "validation", "test"])

    def pairs(split) -> list[Pair]:
        return [(row[source], row[target]) for row in split["translation"]]

    train, dev, test = splits
    return TranslationCorpus(origin="hub:wmt14/de-en", train={"wmt14": pairs(train)}, dev=pairs(dev), test=pairs(test))


def load_wmt14(
    source: str = "en", target: str = "de", tatoeba: bool = True, max_train_pairs: int = 1_000_000, data_dir: Path | None = None
) -> TranslationCorpus:
    """WMT14 from the local data folder (:func:`data_root` of ``data_dir``) when there is one,
    else from the hub.

    Raises:
        DataNotFoundError: when neither works, saying where pebench looked and what to do.
    """
    root = data_root(data_dir)
    if root is not None:
        return wmt14_local(root, source, target, tatoeba)
    return from_hub("WMT14 En-De", f"{NEWS}/newstestYYYY.{{{source},{target}}} and {TATOEBA}/deu.txt.gz", lambda: wmt14_hub(source, target, max_train_pairs))
