"""Text metrics with sacrebleu: corpus BLEU (Papineni et al. 2002) and chrF (Popović 2015),
on detokenized hypotheses against one raw reference stream, each with its sacrebleu signature
(sacrebleu's defaults: 13a tokenization, exponential smoothing; chrF with n = 6, beta = 2)."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF

TEXT_METRICS = {"bleu": BLEU, "chrf": CHRF}


def text_scores(hypotheses: list[str], references: list[str], names: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """Corpus scores (0-100) and signatures of the metrics ``names`` that are text metrics."""
    scores, signatures = {}, {}
    for name in names:
        if name in TEXT_METRICS:
            metric = TEXT_METRICS[name]()
            scores[name] = round(metric.corpus_score(hypotheses, [references]).score, 4)
            signatures[name] = str(metric.get_signature())
    return scores, signatures
