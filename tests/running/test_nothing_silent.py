"""Nothing wrong passes silently: each kind of bad input or bad result, with the behaviour the
user must get (exit status, message, record)."""

import json
import math
import select
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch

from pebench.config.cards import encoding_card, encoding_cards
from pebench.encodings.base import PositionLimitError, Site
from pebench.running.evaluation import TextScorer
from pebench.model.transformer import ModelConfig, Transformer
from pebench.records.store import load_records
from pebench.core.registry import build_encoding
from tests.pebench_command import TINY, pebench, pebench_here


def record_of(results):
    [path] = list((results / "runs").rglob("*.json"))
    return json.loads(path.read_text())


def test_a_diverged_run_is_recorded_failed_with_the_step_and_value(tmp_path):
    out = pebench("run", "--encoding", "rope", "--task", "copy", "--results", str(tmp_path), *TINY, "--set", "training.lr=1e4")
    assert out.returncode == 1 and "NonFiniteError: the training loss at step" in out.stderr and "is nan" in out.stderr, out.stderr
    record = record_of(tmp_path)
    assert record["status"] == "failed" and "buckets" not in record  # no score from a diverged model


@pytest.mark.parametrize("name", sorted(encoding_cards()))
def test_every_encoding_refuses_a_parameter_that_cannot_work(name):
    # every numeric parameter of every card, set to -1: refused at build time, with its name
    card = encoding_card(name)
    from pebench.config.cards import with_plugin_defaults

    params = with_plugin_defaults(card)["params"]
    numeric = [key for key, value in params.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]
    geometry = ModelConfig().geometry(64, 34)
    for key in numeric:
        with pytest.raises(ValueError, match=key):
            build_encoding({**card, "params": {**card["params"], key: -1}}, geometry)


def test_a_missing_device_and_an_unwritable_results_folder_stop_before_training(tmp_path, capsys):
    if not torch.cuda.is_available():
        out = pebench_here(capsys, "run", "--encoding", "rope", "--task", "copy", "--results", str(tmp_path), "--device", "cuda")
        assert out.returncode == 2 and "this machine has no CUDA device" in out.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    out = pebench_here(capsys, "run", "--encoding", "rope", "--task", "copy", "--results", str(blocker / "results"))
    assert out.returncode == 2 and "cannot write run records under" in out.stderr and "--results" in out.stderr


def test_a_split_with_an_unscored_bucket_gets_no_score(tmp_path):
    # learned's table of 60 positions holds training (34) and validation (18 + 36 of output cap) but
    # not 17-32 (up to 34 + 60): the OOD buckets are recorded with their error, the OOD score is None.
    out = pebench("run", "--encoding", "learned", "--task", "copy", "--results", str(tmp_path), *TINY, "--set", "encoding.max_positions=60")
    assert out.returncode == 0, out.stderr
    record = record_of(tmp_path)
    assert record["scores"]["OOD"] is None and record["scores"]["unscored"] == ["17-32", "33-48", "49-64"]
    assert record["scores"]["ID"]["sequence_accuracy"] >= 0
    assert "not scored: bucket(s) 17-32, 33-48, 49-64" in out.stdout


def test_a_text_split_score_is_the_corpus_score_of_its_sentences_not_a_mean_of_buckets():
    protocol = SimpleNamespace(metrics=["chrf"], task=SimpleNamespace())
    scorer = TextScorer(protocol)
    references = ["Ein kleiner Test.", "Noch ein Satz hier.", "Und ein ganz langer Satz, der viel mehr Zeichen hat als die anderen."]
    hypotheses = ["Ein kleiner Test.", "Noch ein Satz hier.", "Und was anderes."]
    examples = [SimpleNamespace(reference=r) for r in references]
    from pebench.core.metrics import text_scores

    pooled = scorer.split_score([{}, {}], examples, hypotheses)["chrf"]
    assert pooled == text_scores(hypotheses, references, ["chrf"])[0]["chrf"]
    per_bucket = [text_scores(hypotheses[:2], references[:2], ["chrf"])[0]["chrf"], text_scores(hypotheses[2:], references[2:], ["chrf"])[0]["chrf"]]
    assert not math.isclose(pooled, sum(per_bucket) / 2)  # the long, wrong sentence weighs by its size


LONG = 40_000


@pytest.mark.parametrize("name", sorted(encoding_cards()))
def test_every_encoding_computes_finite_values_at_any_length_it_admits(name):
    # Positions up to 40,000: an encoding either refuses the length with PositionLimitError or
    # gives finite outputs at every hook, there (xPos overflowed float32 past about 34,850).
    geometry = ModelConfig(d_model=16, n_heads=2, n_layers=1).geometry(LONG, 64)
    encoding = build_encoding(encoding_card(name), geometry).eval()
    if encoding.needs_structure:  # its positions are ids made from the task's structural positions, up to its table
        structure = torch.tensor([[0, 1, LONG - 2, LONG - 1]])
        try:
            pos = encoding.batch_positions(torch.tensor([4]), 4, structure, "decoder", structure=structure)
        except PositionLimitError as error:
            assert f"structural position {LONG - 1}" in str(error)
            return
        assert torch.isfinite(encoding.embed(torch.randn(1, 4, 16), pos, "decoder")).all()
        return
    try:
        encoding.positions(LONG)
    except PositionLimitError as error:
        assert str(LONG) in str(error) and encoding.max_positions is not None and encoding.max_positions < LONG
        return
    site, pos = Site("decoder", 0, "self"), torch.tensor([0, 1, LONG - 2, LONG - 1])
    with torch.no_grad():
        encoding.prepare(LONG, torch.device("cpu"))
        x = torch.randn(1, 4, 16)
        outputs = [encoding.embed(x, pos, "decoder"), encoding.query_bias(pos, site), encoding.key_value_bias(pos, site)]
        q = torch.randn(1, 2, 4, 8)
        outputs += [encoding.project_query(q, pos, site), *encoding.project_key_value(q, q, pos, site)]
        outputs += [encoding.attend(q, q, q, pos, pos, torch.ones(4, 4, dtype=torch.bool).tril()[None, None], site)]
    assert all(torch.isfinite(value).all() for value in outputs if value is not None)


def test_xpos_states_its_limit():
    encoding = build_encoding(encoding_card("xpos"), ModelConfig().geometry(64))
    assert encoding.max_positions == 28_328  # 512 * 100 ln 2 / ln 3.5, by hand
    encoding.positions(28_328)
    with pytest.raises(PositionLimitError, match="at most 28328 positions, but a sequence of 28329 tokens"):
        encoding.positions(28_329)


@pytest.mark.parametrize("name", ["xpos", "learned"])
def test_decoding_at_positions_past_the_limit_is_refused_not_scored(name):
    # Transformer.decode takes positions from its caller (a notebook, a plugin's test): past
    # max_positions it raises, as forward and encode do, instead of returning NaN logits (xPos did).
    config = ModelConfig(d_model=16, n_heads=2, n_layers=1, d_ff=32)
    model = Transformer(config, 12, build_encoding(encoding_card(name), config.geometry(64))).eval()
    limit = model.encoding.max_positions
    start = 36_990 if name == "xpos" else limit - 3
    with torch.no_grad(), pytest.raises(PositionLimitError, match=rf"'{type(model.encoding).__name__}' represents at most {limit} positions, "
                                                                  rf"but a sequence of {start + 6} tokens"):
        model.decode(torch.full((1, 6), 5), torch.arange(start, start + 6), {})
    with torch.no_grad():
        assert torch.isfinite(model.decode(torch.full((1, 6), 5), torch.arange(limit - 6, limit), {})).all()  # up to the limit: served


def test_the_report_names_every_file_it_skips_and_why(tmp_path):
    good = tmp_path / "good"
    assert pebench("run", "--encoding", "rope", "--task", "copy", "--results", str(good), *TINY).returncode == 0
    [path] = list((good / "runs").rglob("*.json"))
    runs = path.parent
    (runs / "array.json").write_text("[1, 2]")
    (runs / "empty.json").write_text("{}")
    (runs / "broken.json").write_text("{")
    text = json.loads(path.read_text())
    text["buckets"][1]["metrics"]["exact_match"] = "high"
    (runs / "text-metric.json").write_text(json.dumps(text))
    (runs / "no-buckets.json").write_text(json.dumps({key: value for key, value in text.items() if key != "buckets"}))
    (runs / "failed.json").write_text(json.dumps({"status": "failed", "error": {"type": "NonFiniteError", "message": "loss nan"}}))
    records, skipped = load_records(good)
    reasons = {p.name: reason for p, reason in skipped}
    assert len(records) == 1 and set(reasons) == {"array.json", "empty.json", "broken.json", "text-metric.json", "no-buckets.json", "failed.json"}
    assert reasons["array.json"] == "not a run record (a JSON list)"
    assert reasons["text-metric.json"].startswith("not a valid record at buckets/1/metrics/exact_match: 'high' is not of type")
    assert reasons["no-buckets.json"] == "not a valid record: 'buckets' is a required property"
    assert "NonFiniteError: loss nan" in reasons["failed.json"] and reasons["empty.json"] == "status None"
    out = pebench("report", str(good))
    assert out.returncode == 0 and out.stderr.count("pebench report: skipping") == 6 and "array.json" in out.stderr


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path):
    # As from a terminal: a shell that started the tests in the background would have left SIGINT ignored.
    process = subprocess.Popen([sys.executable, "-m", "pebench", "run", "--encoding", "rope", "--task", "copy", "--results", str(tmp_path),
                                "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    ready, _, _ = select.select([process.stderr], [], [], 300)  # imports can take long on a busy machine
    started = process.stderr.readline() if ready else process.kill() or "nothing on stderr in 300 s"
    assert started.startswith("pebench run: task copy"), started  # printed once the run is planned, just before training
    time.sleep(2)  # training
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("pebench run: task")]
    assert lines == ["pebench run: interrupted; nothing was written for the work in progress"], stderr
    assert not list(tmp_path.rglob("*.json"))
