"""wmt_long on the real files of ../shared/data: data, BPE, buckets, BLEU, a tiny run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pebench.tasks import data as pebench_data
from pebench.records.types import to_json
import torch

from pebench.config.cards import encoding_card, encoding_cards, task_card
from pebench.tasks.data import DataNotFoundError, load_wmt14
from pebench.core.metrics import text_scores
from pebench.config.overrides import apply_overrides
from pebench.config.protocol import SECTION_KEYS, length_bucket, resolve
from pebench.core.registry import ENCODINGS, plugins
from pebench.tasks.tokenization import joint_bpe
from pebench.running.train import run, set_up

DATA = Path(os.environ.get("PEBENCH_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
needs_data = pytest.mark.skipif(not (DATA / "wmt_newstest_en_de").is_dir(), reason=f"no shared data at {DATA}")


def test_perfect_hypothesis_scores_100_on_detokenized_text():
    references = ["Das ist ein Test, oder?", "Wir sehen uns morgen um 10 Uhr."]
    scores, signatures = text_scores(references, references, ["bleu", "chrf"])
    assert scores == {"bleu": 100.0, "chrf": 100.0}
    assert signatures["bleu"].startswith("nrefs:1|") and "tok:13a" in signatures["bleu"]
    # sacrebleu's 13a tokenizer splits punctuation itself, so detached punctuation still scores 100;
    # text whose words are split (as raw subwords would be) does not.
    tokenized, _ = text_scores(["Das ist ein Test , oder ?", "Wir sehen uns morgen um 10 Uhr ."], references, ["bleu"])
    assert tokenized["bleu"] == 100.0
    spaced, _ = text_scores(["D a s ist ein Test, oder?", "Wir sehen uns morgen um 10 Uhr."], references, ["bleu"])
    assert spaced["bleu"] < 100.0


def test_bucket_edges():
    # wmt_long's buckets: [1, 32], [33, 64], [65, 96], [97, inf).
    card = task_card("wmt_long")
    buckets = [length_bucket(bounds, "bucket") for bounds in card["split"]["buckets"]]

    def owner(length):
        return [b.label for b in buckets if length in b]
    assert owner(1) == ["1-32"] and owner(32) == ["1-32"] and owner(33) == ["33-64"]
    assert owner(64) == ["33-64"] and owner(65) == ["65-96"] and owner(96) == ["65-96"] and owner(97) == ["97+"] and owner(500) == ["97+"]
    assert owner(0) == []


def test_missing_data_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=rf"PEBENCH_DATA={tmp_path} lacks .* WMT files"):
        load_wmt14()


def test_no_local_folder_and_no_hub_says_how_to_point_at_data(monkeypatch):
    monkeypatch.delenv("PEBENCH_DATA", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("hub unreachable")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataNotFoundError, match=r"wmt_newstest_en_de/newstestYYYY\.\{en,de\}.*--data-dir FOLDER.*export PEBENCH_DATA=FOLDER"):
        load_wmt14()


def test_hub_path_reads_wmt14_splits(monkeypatch):
    import datasets

    def fake_hub(name, config, split):
        assert (name, config) == ("wmt14", "de-en")
        rows = {"translation": [{"en": "Hello world.", "de": "Hallo Welt."}]}
        return [datasets.Dataset.from_dict(rows) for _ in split]

    monkeypatch.delenv("PEBENCH_DATA", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", fake_hub)
    monkeypatch.setattr(pebench_data, "hub_reachable", lambda: True)  # the hub is stubbed, not reached
    corpus = load_wmt14("en", "de")
    assert corpus.origin == "hub:wmt14/de-en" and corpus.test == [("Hello world.", "Hallo Welt.")]


@needs_data
def test_local_data_counts(monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    corpus = load_wmt14()
    assert corpus.counts() == {"train_news": 28158, "train_tatoeba": 169813, "dev": 3000, "test": 3003}
    assert corpus.test[0] == ("Gutach: Increased safety for pedestrians", "Gutach: Noch mehr Sicherheit für Fußgänger")


def test_the_bpe_gives_back_any_text_unseen_symbols_and_spacing_included(tmp_path, monkeypatch):
    # A normalising BPE dropped "›" and changed "´" (99.99 BLEU at best on newstest2014).
    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path))
    tokenizer, _ = joint_bpe(["Das ist ein Test.", "This is a test."] * 50, 300)
    for text in ("›Ja‹ sagte er´s", "naïve café 😀 東京", "\t two  spaces, trailing "):
        assert tokenizer.decode(tokenizer.encode(text).ids) == text


@needs_data
def test_the_bpe_gives_back_every_newstest2014_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    monkeypatch.setenv("PEBENCH_CACHE", str(tmp_path))
    corpus = load_wmt14()
    tokenizer, _ = joint_bpe([text for pair in corpus.dev for text in pair], 2000)
    changed = [text for pair in corpus.test for text in pair if tokenizer.decode(tokenizer.encode(text).ids) != text]
    assert changed == []  # all 6,006 source and reference sentences


TINY_VOCAB = "params.vocab_size=500"


@pytest.fixture(scope="module")
def bpe_cache(tmp_path_factory):
    """One BPE cache for this module's runs on the real training text: the tokenizer (the card's
    text, :data:`TINY_VOCAB`) is trained by the first of them and loaded by the rest."""
    return tmp_path_factory.mktemp("cache")


@needs_data
def test_examples_land_in_the_bucket_of_their_source_subword_length(monkeypatch, bpe_cache):
    monkeypatch.setenv("PEBENCH_DATA", str(DATA))
    monkeypatch.setenv("PEBENCH_CACHE", str(bpe_cache))
    card = task_card("wmt_long")
    apply_overrides(card, {"params": {}}, [TINY_VOCAB], SECTION_KEYS)
    protocol = resolve(card)
    sets = protocol.evaluation_sets()
    assert sum(len(v) for v in sets.values()) == 3003  # every newstest2014 sentence, each in one bucket
    tokenizer = protocol.task.tokenizer
    sources = {reference: source for source, reference in load_wmt14().test}
    for bucket, examples in sets.items():
        for example in examples[:40]:
            assert example.length == len(tokenizer.encode(sources[example.reference]).ids)
            assert example.length in bucket
    examples = sets[protocol.buckets[0]][:20]
    assert [protocol.task.detokenize(e.target) for e in examples] == [e.reference for e in examples]  # the raw text back


@needs_data
def test_wmt_long_end_to_end_tiny(tmp_path, bpe_cache):
    env = {**os.environ, "PEBENCH_CACHE": str(bpe_cache)}
    out = subprocess.run(
        [sys.executable, "-m", "pebench", "run", "--encoding", "flow", "--task", "wmt_long", "--data-dir", str(DATA),
         "--results", str(tmp_path), "--quiet", "--set", "training.steps=4", "--set", "split.eval_examples=4", "--set", "split.validation_examples=4",
         "--set", TINY_VOCAB, "--set", "model.d_model=32", "--set", "model.d_ff=64", "--set", "model.n_layers=1"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "bleu" in out.stdout and "97+" in out.stdout
    [path] = (tmp_path / "runs" / "wmt_long" / "flow").glob("*.json")
    record = json.loads(path.read_text())
    assert record["data"]["pairs"] == {"train_news": 28158, "train_tatoeba": 169813, "dev": 3000, "test": 3003}
    assert record["data"]["origin"].startswith("local:")
    assert [b["n"] for b in record["buckets"]] == [4, 4, 4, 4] and record["scores"]["unscored"] == []
    assert set(record["scores"]) == {"ID", "OOD", "all", "unscored", "signatures"} and set(record["scores"]["all"]) == {"bleu", "chrf"}
    assert record["scores"]["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert sum(length["n"] for length in record["buckets"][1]["lengths"]) == 4  # per length, as per bucket
    assert [point["step"] for point in record["training"]["curve"]] == [4]  # the validation BLEU at the cap
    assert record["training"]["steps_to_target"] is None and record["training"]["target"] is None
    assert set(record["stages"]) == {"data_seconds", "train_seconds", "eval_seconds"}
    assert record["task"]["split"]["buckets"][-1] == [97, "inf"]


@pytest.fixture(scope="module")
def tiny_wmt(bpe_cache):
    """wmt_long on the real files, with a tiny model and 3 sentences per bucket."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PEBENCH_DATA", str(DATA))
        patch.setenv("PEBENCH_CACHE", str(bpe_cache))
        card = task_card("wmt_long")
        apply_overrides(card, {"params": {}}, ["training.steps=2", "training.batch_size=8", "split.eval_examples=3", TINY_VOCAB,
                                                "model.d_model=16", "model.d_ff=32", "model.n_layers=1", "decoding.max_length_b=2",
                                                "split.validation_examples=3"], SECTION_KEYS)
        return resolve(card)


@needs_data
@pytest.mark.parametrize("encoding", [name for name, card in encoding_cards().items() if not plugins(ENCODINGS)[card["plugin"]].needs_structure])
def test_every_encoding_completes_wmt_long_tiny(tiny_wmt, encoding):  # but those that need structural positions, refused on it (test_long_addition)
    card = encoding_card(encoding)
    measured = to_json(run(tiny_wmt, set_up(tiny_wmt, card, seed=0), seed=0, device=torch.device("cpu"), progress=False))
    assert [b["n"] for b in measured["buckets"]] == [3, 3, 3, 3]
    assert all(b["metrics"]["bleu"] is None or 0 <= b["metrics"]["bleu"] <= 100 for b in measured["buckets"])
    assert all(0 <= b["metrics"]["chrf"] <= 100 for b in measured["buckets"])
    assert measured["scores"]["all"]["chrf"] >= 0
