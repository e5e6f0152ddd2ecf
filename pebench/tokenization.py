"""Joint BPE trained with HF ``tokenizers``, cached on disk.

A byte-pair-encoding model (Sennrich et al. 2016, arXiv:1508.07909) learned jointly on the
source and target training text, with NFKC normalisation and the Metaspace pre-tokenizer and
decoder, so that decoding ids gives back detokenized text (spaces restored), which is what
BLEU and chrF are computed on. The trained tokenizer is saved under
``$PEBENCH_CACHE`` (default ``~/.cache/pebench``) at ``bpe/<key>.json``, the key a hash of the
training text and the settings, so a second run on the same data loads it instead of training.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

UNKNOWN = "<unk>"


def cache_dir() -> Path:
    return Path(os.environ.get("PEBENCH_CACHE", Path.home() / ".cache" / "pebench")).expanduser()


def _key(texts: list[str], settings: dict) -> str:
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def joint_bpe(texts: list[str], vocab_size: int) -> tuple[Tokenizer, Path]:
    """A BPE tokenizer of at most ``vocab_size`` tokens for ``texts``, and its cache file."""
    settings = {"model": "bpe", "vocab_size": vocab_size, "normalizer": "nfkc", "pre_tokenizer": "metaspace", "version": 1}
    path = cache_dir() / "bpe" / f"{_key(texts, settings)}.json"
    if path.is_file():
        return Tokenizer.from_file(str(path)), path
    tokenizer = Tokenizer(models.BPE(unk_token=UNKNOWN))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[UNKNOWN], show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    tokenizer.save(str(temporary))
    os.replace(temporary, path)
    return tokenizer, path
