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
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF

EXAMPLE_METRICS = ("sequence_accuracy", "exact_match", "teacher_forced_accuracy")
TEXT_METRICS = {"bleu": BLEU, "chrf": CHRF}
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
