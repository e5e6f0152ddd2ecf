"""Metrics: per-example scores of a generated output, and corpus text scores with sacrebleu.

Per-example metrics compare an output with its target as token sequences, both ending with the
end token (EOS) where one was produced:
- *exact match*: 1 if the output is the target, EOS included, else 0.
- *sequence accuracy*: the fraction of target positions (EOS included) where the output holds
  the target's token (Delétang et al. 2023, arXiv:2207.02098, sec. 4, "per-sequence accuracy",
  there of one-pass outputs; here of greedy outputs as well). A missing token leaves its
  position and every later one without a match; an extra token takes a target position (at the
  latest, the EOS position). A model that skips one of 8 tokens scores 1/9 where teacher-forced
  token accuracy gives it 8/9.
- *teacher-forced accuracy*: the fraction of target tokens (EOS included) that are the argmax
  given the gold prefix; flatters an autoregressive model, so it is named apart.

Text metrics: corpus BLEU (Papineni et al. 2002) and chrF (Popović 2015) on detokenized
hypotheses against one raw reference stream, each with its sacrebleu signature (sacrebleu's
defaults: 13a tokenization, exponential smoothing; chrF with n = 6, beta = 2).

Language-model metrics (:mod:`pebench.running.perplexity`): perplexity and bits per token, of the
nonoverlapping and the sliding-window evaluation.

:data:`METRICS` is the registry of every metric: its kind (how it is scored and aggregated),
its direction and how many digits a table shows; nothing else in pebench spells these facts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

KINDS = ("example", "text", "language_model")


@dataclass(frozen=True)
class Metric:
    """What pebench knows of a metric.

    Args:
        name: as a task card names it.
        kind: ``"example"`` (scored per example, averaged over a length's examples, then over a
            split's lengths), ``"text"`` (a corpus score over a split's sentences, sacrebleu) or
            ``"language_model"`` (scored on a text at each evaluation length).
        higher_is_better: the direction of "better" (ranks, differences, plots).
        digits: decimals a table shows.
        margin: the equivalence margin δ of a difference of two encodings' scores, in the
            metric's units (:mod:`pebench.analysis.verdicts`): differences inside ±δ count as none. 0.02
            for accuracies (two points), 0.5 BLEU or chrF points, 0.1 perplexity, 0.01 bits.
        bounds: the values the metric can take (a plotted interval is clipped to them):
            [0, 1] for accuracies, [0, 100] for BLEU and chrF, [1, inf) for perplexity, [0, inf)
            for bits.
    """

    name: str
    kind: str
    higher_is_better: bool = True
    digits: int = 3
    margin: float = 0.02
    bounds: tuple[float, float] = (0.0, 1.0)


METRICS = {
    metric.name: metric
    for metric in (
        Metric("sequence_accuracy", "example"),
        Metric("exact_match", "example"),
        Metric("teacher_forced_accuracy", "example"),
        Metric("bleu", "text", digits=2, margin=0.5, bounds=(0.0, 100.0)),
        Metric("chrf", "text", digits=2, margin=0.5, bounds=(0.0, 100.0)),
        *(
            Metric(name, "language_model", higher_is_better=False, margin=0.01, bounds=(0.0, math.inf))
            if name.endswith("bits_per_token")
            else Metric(name, "language_model", higher_is_better=False, margin=0.1, bounds=(1.0, math.inf))
            for name in ("perplexity", "bits_per_token", "sliding_perplexity", "sliding_bits_per_token")
        ),
    )
}


def of_kind(kind: str) -> tuple[str, ...]:
    """The names of the metrics of ``kind``, in registry order."""
    return tuple(name for name, metric in METRICS.items() if metric.kind == kind)


def higher_is_better(name: str) -> bool:
    return METRICS[name].higher_is_better


TEXT_METRICS = {"bleu": BLEU, "chrf": CHRF}  # sacrebleu's metric of each text metric
BLEU_ORDER = 4  # BLEU's longest n-gram (sacrebleu's default)


def exact_match(output: Sequence[int], target: Sequence[int]) -> float:
    """1.0 if ``output`` equals ``target`` token for token (lengths included), else 0.0."""
    return float(list(output) == list(target))


def sequence_accuracy(output: Sequence[int], target: Sequence[int]) -> float:
    """Mean over the positions of ``target`` of ``output[i] == target[i]``, a missing output
    position counting as wrong (see the module docstring).

    Raises:
        ValueError: for an empty target (every target ends with its end token).
    """
    if not target:
        raise ValueError("sequence accuracy needs a target of at least one token (its end token)")
    return sum(o == t for o, t in zip(output, target)) / len(target)


def text_scores(hypotheses: list[str], references: list[str], names: list[str]) -> tuple[dict[str, float | None], dict[str, str]]:
    """Corpus scores (0-100) and signatures of the text metrics among ``names``. BLEU is None
    (undefined, not 0) when no reference has 4 words (sacrebleu's 13a tokens): no 4-gram to
    match, so even a perfect output would score 0; chrF is defined on any text.

    Raises:
        ValueError: if hypotheses and references differ in number or are not lists of strings
            (sacrebleu would truncate the longer, or score a bare string character by character).
    """
    for what, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise ValueError(f"text_scores needs {what} as a list of strings, one per example; got {type(texts).__name__}")
    if len(hypotheses) != len(references):
        raise ValueError(f"text_scores needs one reference per hypothesis; got {len(hypotheses)} hypotheses and {len(references)} references")
    scores, signatures = {}, {}
    for name in names:
        if name not in TEXT_METRICS:
            continue
        metric = TEXT_METRICS[name]()
        score = round(metric.corpus_score(hypotheses, [references]).score, 4)
        signatures[name] = str(metric.get_signature())
        defined = name != "bleu" or any(len(metric.tokenizer(reference).split()) >= BLEU_ORDER for reference in references)
        scores[name] = score if defined else None
    return scores, signatures
