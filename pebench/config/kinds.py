"""The kinds of task pebench scores, and what each kind implies; the one place that knows them.

A task card's kind follows from its task family, its metrics' kind (:data:`pebench.core.metrics.METRICS`)
and its model's architecture, as lm-evaluation-harness picks a task's evaluation by its
``output_type``:

- ``generated``: examples whose outputs are decoded token by token (greedy or beam) by a
  decoder-only or encoder-decoder model, scored per example (exact match, sequence accuracy);
  the decoding cap is raised to the task's longest gold output, so a right answer always fits.
- ``one_pass``: examples whose outputs are an encoder-only model's argmax at its output slots
  (Delétang et al. 2023, arXiv:2207.02098, sec. 3), scored per example; no decoding cap.
- ``text``: examples decoded by an encoder-decoder, detokenized and scored as a corpus (BLEU,
  chrF with sacrebleu); free generation at the card's cap, whose capped outputs are counted.
- ``language_model``: a token stream (:class:`pebench.tasks.base.TokenStream`) scored by
  perplexity at each evaluation length (Press et al. 2022, arXiv:2108.12409), decoder-only.

The scorer of each kind is in :mod:`pebench.running.evaluation` (``SCORERS``). A new kind is added here
(its :class:`TaskKind` and the rule in :func:`kind_of`) and there (its scorer); a new metric in
:data:`pebench.core.metrics.METRICS`, under the kind of metric it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from pebench.core.metrics import METRICS, of_kind
from pebench.model.architecture import Architecture
from pebench.model.batching import LANGUAGE_MODEL
from pebench.tasks.base import Task, TaskFamily, TokenStream


@dataclass(frozen=True)
class TaskKind:
    """What a kind of task implies for the protocol and its scorer.

    Args:
        name: the kind's name, its scorer's key in :data:`pebench.running.evaluation.SCORERS`.
        metric_kind: the kind of its metrics (:attr:`pebench.core.metrics.Metric.kind`).
        architectures: the model architectures that can score it.
        on_examples: scored on examples drawn per bucket; False: on the task's token stream.
        decoded: outputs generated token by token under a decoding cap (one-pass and
            token-stream kinds have none).
        cap_from_task: the cap is raised to the task's longest gold output (False: free
            generation at the card's cap).
    """

    name: str
    metric_kind: str
    architectures: tuple[Architecture, ...]
    on_examples: bool = True
    decoded: bool = True
    cap_from_task: bool = True

    def pack_format(self, architecture: Architecture) -> Architecture | str:
        """How training examples become model inputs (:func:`pebench.model.batching.pack`)."""
        return architecture if self.on_examples else LANGUAGE_MODEL


KINDS = {
    kind.name: kind
    for kind in (
        TaskKind("generated", "example", (Architecture.DECODER, Architecture.ENCODER_DECODER)),
        TaskKind("one_pass", "example", (Architecture.ENCODER,), decoded=False),
        TaskKind("text", "text", (Architecture.ENCODER_DECODER,), cap_from_task=False),
        TaskKind("language_model", "language_model", (Architecture.DECODER,), on_examples=False, decoded=False),
    )
}


def kind_of(family: str, task: TaskFamily, metrics: list[str], architecture: Architecture) -> TaskKind:
    """The kind of a card whose task family ``family`` built ``task``, scored with ``metrics``
    (names in :data:`pebench.core.metrics.METRICS`) by a model of ``architecture``.

    Raises:
        ValueError: for metrics of more than one kind, a token stream scored with other metrics
            than a language model's (or examples with those), an architecture the kind cannot
            use, or text metrics on a task that produces no text.
    """
    kinds = {METRICS[name].kind for name in metrics}
    if len(kinds) != 1:
        raise ValueError(
            f"metrics are of one kind: per example ({', '.join(of_kind('example'))}), text ({', '.join(of_kind('text'))}) "
            f"or language model ({', '.join(of_kind('language_model'))}); got {metrics}"
        )
    (metric_kind,) = kinds
    if isinstance(task, TokenStream) != (metric_kind == "language_model"):
        raise ValueError(
            f"a language-model task family (a token stream) goes with the language-model metrics ({', '.join(of_kind('language_model'))}), "
            f"and only it does; task family '{family}' with {metrics}"
        )
    if metric_kind == "example":
        kind = KINDS["one_pass" if architecture == Architecture.ENCODER else "generated"]
    else:
        kind = KINDS[metric_kind]
    if architecture not in kind.architectures:
        names = " or ".join(name.replace("_", "-") for name in kind.architectures)
        raise ValueError(
            f"{metric_kind.replace('_', '-')} metrics ({', '.join(metrics)}) need a model of architecture {names}, "
            f"not '{architecture}' (task family '{family}'); set model.architecture = '{kind.architectures[0]}'"
        )
    if kind.name == "text" and type(task).detokenize is Task.detokenize:
        raise ValueError(f"task family '{family}' produces no text, so it cannot be scored with {', '.join(of_kind('text'))}")
    return kind
