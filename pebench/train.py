"""One run: build the model, train on the short lengths, evaluate every length bucket.

Evaluation is teacher-forced: each target token is predicted from the gold prefix.
*Exact match* is the fraction of examples whose every target token (and EOS) is the argmax;
this equals the exact match of greedy decoding, since greedy decoding reproduces the target iff
every step's argmax given the gold prefix is the gold token. *Token accuracy* is the fraction of
target tokens (EOS included) predicted correctly, pooled over the bucket.

Tasks scored on text (BLEU, chrF) are instead decoded (:mod:`pebench.decoding`) and the
detokenized outputs scored with sacrebleu per bucket and over the whole evaluation set.

Throughput is non-padding input tokens per second: training over the steps after the first
``TIMING_WARMUP_STEPS`` (or half the steps of a shorter run), evaluation over the forward passes after one warm-up pass (for
decoded tasks: source plus generated tokens per second of decoding).
"""

from __future__ import annotations

import inspect
import math
import platform
import random
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import torch
from torch import nn
from tqdm import tqdm

from .batching import FIRST_SYMBOL, IGNORE, Batch, pack
from .decoding import generate
from .encodings.base import Geometry, PositionalEncoding, PositionLimitError
from .metrics import text_scores
from .model import PAD, Transformer
from .protocol import Protocol
from .registry import ENCODINGS, plugin
from .tasks.base import Example, LengthBucket

TIMING_WARMUP_STEPS = 10
GROUPED_BATCHES = 50


def resolve_device(device: str) -> torch.device:
    """``"auto"`` is CUDA when available, else CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def autocast(device: torch.device) -> torch.autocast:
    """bf16 autocast on CUDA, for training and evaluation alike; a no-op on other devices."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA), so that wall-clock timings are honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_model(protocol: Protocol, encoding_card: dict, max_length: int, train_length: int | None = None) -> Transformer:
    """The task's model with the card's encoding, sized for sequences up to ``max_length``
    (``train_length``: the longest training sequence)."""
    geometry = protocol.model.geometry(max_length, train_length)
    return Transformer(protocol.model, FIRST_SYMBOL + len(protocol.task.symbols), build_encoding(encoding_card, geometry))


def build_encoding(encoding_card: dict, geometry: Geometry) -> PositionalEncoding:
    """The card's encoding plugin built for ``geometry`` with the card's params.

    Raises:
        ValueError: for a param the plugin does not take, or a value it refuses (both list the
            plugin's parameters).
        TypeError: for a value of the wrong type (listing them too).
    """
    cls = plugin(ENCODINGS, encoding_card["plugin"])
    signature = inspect.signature(cls)
    accepted = [name for name in signature.parameters if name != "geometry"]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    unknown = sorted(set(encoding_card["params"]) - set(accepted))
    described = f"encoding '{encoding_card.get('name', encoding_card['plugin'])}' ({cls.__name__}); its parameters: {', '.join(accepted) or 'none'}"
    if unknown and not takes_any:
        raise ValueError(f"no parameter {', '.join(map(repr, unknown))} in {described}")
    try:
        return cls(geometry, **encoding_card["params"])
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} (in {described}; set with --set encoding.NAME=VALUE)") from error


def _learning_rate_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up to 1, then cosine decay to 0.1 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, progress)))


def _loss(model: Transformer, batch: Batch, label_smoothing: float) -> torch.Tensor:
    with autocast(batch.tokens.device):
        logits = model(batch.tokens, batch.source)
    return nn.functional.cross_entropy(logits.float().flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE, label_smoothing=label_smoothing)


def training_batches(protocol: Protocol, rng: random.Random) -> Iterator[list[Example]]:
    """Endless batches of training examples; with ``length_grouped``, batches of similar
    lengths cut from sorted pools of ``GROUPED_BATCHES`` batches, in shuffled order."""
    size = protocol.training.batch_size
    examples = protocol.task.training_examples(rng, protocol.train_lengths)
    while True:
        if not protocol.training.length_grouped:
            yield [next(examples) for _ in range(size)]
            continue
        pool = sorted((next(examples) for _ in range(GROUPED_BATCHES * size)), key=lambda e: (e.length, len(e.target)))
        batches = [pool[i : i + size] for i in range(0, len(pool), size)]
        rng.shuffle(batches)
        yield from batches


def train(model: Transformer, protocol: Protocol, seed: int, device: torch.device, progress: bool = True) -> dict:
    """Train ``model`` on the protocol's training lengths. Returns the record's ``training`` part."""
    config = protocol.training
    batches = training_batches(protocol, random.Random(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _learning_rate_factor(s, config.warmup_steps, config.steps))
    model.train()
    losses, timed_tokens, timed_seconds = [], 0, 0.0
    warmup = min(TIMING_WARMUP_STEPS, config.steps // 2)
    start = time.perf_counter()
    bar = tqdm(range(config.steps), desc=f"train {protocol.name}", disable=not progress, leave=False)
    for step in bar:
        batch = pack(next(batches), protocol.model.architecture).to(device)
        sync_device(device)
        tick = time.perf_counter()
        loss = _loss(model, batch, config.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        schedule.step()
        sync_device(device)
        if step >= warmup:
            timed_tokens += batch.num_tokens
            timed_seconds += time.perf_counter() - tick
        losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    tail = losses[-max(1, len(losses) // 20) :]
    return {
        "steps": config.steps,
        "wall_seconds": round(time.perf_counter() - start, 2),
        "tokens_per_second": round(timed_tokens / timed_seconds, 1) if timed_seconds else None,
        "final_loss": round(sum(tail) / len(tail), 5),
        **_peak_memory(device),
    }


def _peak_memory(device: torch.device) -> dict:
    if device.type == "cuda":
        return {"peak_memory_mb": round(torch.cuda.max_memory_allocated(device) / 2**20, 1), "memory_kind": "cuda_max_allocated"}
    scale = 1 if platform.system() == "Darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return {"peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20, 1), "memory_kind": "process_peak_rss"}


@torch.no_grad()
def evaluate_bucket(model: Transformer, protocol: Protocol, examples: list[Example], device: torch.device) -> dict:
    """Teacher-forced metrics and evaluation throughput on one bucket's examples."""
    model.eval()
    size = protocol.training.eval_batch_size
    batches = [pack(examples[i : i + size], protocol.model.architecture).to(device) for i in range(0, len(examples), size)]
    with autocast(device):
        model(batches[0].tokens, batches[0].source)  # warm-up (and FLOATER's cached solve)
    exact, correct_tokens, tokens, seconds = 0, 0, 0, 0.0
    for batch in batches:
        sync_device(device)
        tick = time.perf_counter()
        with autocast(device):
            predictions = model(batch.tokens, batch.source).argmax(-1)
        sync_device(device)
        seconds += time.perf_counter() - tick
        scored = batch.labels != IGNORE
        hits = (predictions == batch.labels) & scored
        exact += int((hits | ~scored).all(dim=1).sum())
        correct_tokens += int(hits.sum())
        tokens += batch.num_tokens
    metrics = {"exact_match": exact / len(examples), "token_accuracy": correct_tokens / sum(b.num_targets for b in batches)}
    return {"metrics": {name: round(metrics[name], 5) for name in protocol.metrics}, "eval_tokens_per_second": round(tokens / seconds, 1)}


def _bucket_entry(model: Transformer, protocol: Protocol, bucket: LengthBucket, index: int, examples: list[Example]) -> dict:
    """The bucket's identity in the record. Lets the encoding plan for the bucket's longest
    sequence (e.g. switch RoPE scaling on) and records the plan when there is one."""
    entry = {"bucket": bucket.label, "lo": bucket.lo, "hi": bucket.hi, "in_distribution": index == 0, "n": len(examples)}
    state = model.encoding.plan(max(protocol.longest_sequence(e) for e in examples))
    return {**entry, "encoding_state": state} if state else entry


@torch.no_grad()
def decode_bucket(model: Transformer, protocol: Protocol, examples: list[Example], device: torch.device) -> tuple[list[str], float, int]:
    """Detokenized outputs for ``examples`` (in their order), decoding seconds, and tokens read
    and generated. Examples are decoded in batches of similar source length."""
    model.eval()
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))
    outputs: list[list[int]] = [[] for _ in examples]
    seconds, tokens = 0.0, 0
    size = protocol.training.eval_batch_size
    for start in range(0, len(order), size):
        chunk = order[start : start + size]
        source = pack([examples[i] for i in chunk], protocol.model.architecture).source.to(device)
        sync_device(device)
        tick = time.perf_counter()
        with autocast(device):
            generated = generate(model, source, protocol.decoding)
        sync_device(device)
        seconds += time.perf_counter() - tick
        tokens += int((source != PAD).sum()) + sum(len(g) + 1 for g in generated)
        for i, ids in zip(chunk, generated):
            outputs[i] = [token - FIRST_SYMBOL for token in ids if token >= FIRST_SYMBOL]
    return [protocol.task.detokenize(ids) for ids in outputs], seconds, tokens


def evaluate_text(model: Transformer, protocol: Protocol, sets: dict[LengthBucket, list[Example]], device: torch.device) -> tuple[list[dict], dict]:
    """Decode every bucket; score each bucket and the whole evaluation set with sacrebleu.
    Returns the bucket entries and the ``corpus`` entry (n, metrics, signatures)."""
    entries, hypotheses, references = [], [], []
    for index, (bucket, examples) in enumerate(sets.items()):
        entry = _bucket_entry(model, protocol, bucket, index, examples)  # plans first: it may change the encoding
        try:
            outputs, seconds, tokens = decode_bucket(model, protocol, examples, device)
        except PositionLimitError as error:
            entries.append({**entry, "metrics": None, "eval_tokens_per_second": None, "error": str(error)})
            continue
        scores, _ = text_scores(outputs, [e.reference for e in examples], protocol.metrics)
        entries.append({**entry, "metrics": scores, "eval_tokens_per_second": round(tokens / seconds, 1),
                        "samples": [{"reference": e.reference, "output": o} for e, o in list(zip(examples, outputs))[:3]]})
        hypotheses += outputs
        references += [e.reference for e in examples]
    scores, signatures = text_scores(hypotheses, references, protocol.metrics) if hypotheses else ({}, {})
    return entries, {"n": len(hypotheses), "metrics": scores, "signatures": signatures}


def evaluate(model: Transformer, protocol: Protocol, sets: dict[LengthBucket, list[Example]], device: torch.device) -> list[dict]:
    """One teacher-forced entry per bucket. A bucket the encoding cannot represent (a learned
    table too short) is reported with its error and no metrics, not as a failed run."""
    results = []
    for index, (bucket, examples) in enumerate(sets.items()):
        entry = _bucket_entry(model, protocol, bucket, index, examples)  # plans first: it may change the encoding
        try:
            entry.update(evaluate_bucket(model, protocol, examples, device))
        except PositionLimitError as error:
            entry.update({"metrics": None, "eval_tokens_per_second": None, "error": str(error)})
        results.append(entry)
    return results


@dataclass
class RunSetup:
    """What a run builds before training: the evaluation sets and the model."""

    sets: dict[LengthBucket, list[Example]]
    model: Transformer
    sequence_lengths: dict[str, int]


def set_up(protocol: Protocol, encoding_card: dict, seed: int) -> RunSetup:
    """Draw the evaluation sets and build the seeded model (on CPU). Everything a bad card can
    break fails here, before any training.

    Raises:
        ValueError: an empty bucket or a bad encoding param; TypeError: a param of the wrong
        type; PositionLimitError: an encoding that cannot represent the training lengths.
    """
    torch.manual_seed(seed)
    sets = protocol.evaluation_sets()
    train_length = protocol.train_length()
    longest = max(protocol.longest_sequence(e) for examples in sets.values() for e in examples)
    lengths = {"train": train_length, "max": max(train_length, longest)}
    model = build_model(protocol, encoding_card, lengths["max"], lengths["train"])
    model.encoding.check_length(lengths["train"])
    return RunSetup(sets, model, lengths)


def run(protocol: Protocol, setup: RunSetup, seed: int, device: torch.device, progress: bool = True) -> dict:
    """Train and evaluate one (task, encoding, seed) from its :func:`set_up`. Returns the
    record's measured parts: ``environment``, ``parameters``, ``model``, ``training``,
    ``buckets``, ``stages`` (wall seconds of training and evaluation), ``sequence_lengths`` (the
    longest training sequence and the longest sequence the model reads) and, for text-scored
    tasks, ``corpus``."""
    model, sets = setup.model.to(device), setup.sets
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    training = train(model, protocol, seed, device, progress)
    tick = time.perf_counter()
    measured = {}
    if protocol.generates:
        measured["buckets"], measured["corpus"] = evaluate_text(model, protocol, sets, device)
    else:
        measured["buckets"] = evaluate(model, protocol, sets, device)
    return {
        "environment": {
            "torch": torch.__version__,
            "python": platform.python_version(),
            "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
            "threads": torch.get_num_threads(),
            "platform": platform.platform(),
        },
        "parameters": model.parameter_counts(),
        "model": asdict(protocol.model),
        "training": training,
        "stages": {"train_seconds": training["wall_seconds"], "eval_seconds": round(time.perf_counter() - tick, 2)},
        "sequence_lengths": setup.sequence_lengths,
        "data": protocol.task.data,
        **measured,
    }
