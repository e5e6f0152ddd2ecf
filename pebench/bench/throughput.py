"""Throughput benchmark: every encoding side by side in one process (``pebench bench``).

For each shape (architecture, sequence length) every contender gets the same model, the default
model of a task card (``copy`` for decoder-only, ``wmt_long`` for the encoder-decoder), and the
same random batch of about ``tokens_per_batch`` tokens with no padding. Rounds are interleaved:
each round times one training step (forward, cross-entropy, backward, AdamW step) of every
contender in turn, the order rotated from round to round so that drifting machine load falls on
all of them alike; then as many rounds time one evaluation forward (no gradient) each, the
weights now fixed, as in evaluation (FLOATER serves its cached solution). Figures are medians
over the rounds after the warm-up round. *Ratio to NoPE* is a contender's step time over NoPE's in the
same shape (1.10 = 10% slower).

Peak memory is measured first, at every shape, in each contender's first training step and
evaluation forward: the most bytes of tensors the call allocated and held at once, above what
was held before it. On CUDA from torch's peak allocated bytes; on CPUs from every allocation and
free that torch's profiler records during the call (``profile_memory``), summed in time order.
The process's resident set would not do: the allocator keeps freed blocks for reuse, and the
kernel may reclaim other pages during the call.

glibc's mmap threshold is held at 1 MiB while memory is measured, so that every large tensor is
a mapping of its own, returned to the system when freed, and at 32 MiB (glibc's own upper bound,
where its dynamic threshold settles in a long run of one model) in the timed rounds: left to
glibc's dynamic threshold, blocks freed by the measurements of all shapes would stay in the heap
the timed rounds use, and skew their ratios (docs/throughput.md).

Contenders: every encoding card, FLOATER solved through torchdiffeq (``flow+torchdiffeq``, the
same RK4 steps as the card's host-timed loop) and with the adjoint method (``flow+adjoint``), and, when
x-transformers is installed (``pip install x-transformers``), a peer: the same-size decoder
built by x-transformers with its sinusoidal, rotary, ALiBi and T5-bias options.
Tokens are input tokens: batch x length (decoder-only), batch x 2 x length (encoder-decoder,
source and target of the same length). On CUDA both passes run under bf16 autocast.
:func:`run_benchmark` hands over the table after each shape, so that a caller can save it
(``pebench bench``: :mod:`pebench.cli.bench`).

FLOPs: each contender's training step is counted once, untimed, after its memory is measured,
with torch's ``FlopCounterMode`` (:class:`StepFlopCounter`: matrix products, SDPA and
convolutions, forward and backward; what it does not see is in docs/throughput.md), beside the
cross-check 6ND (:func:`six_nd`). The machine's matmul rate at a shape is that of the model's
largest product (:class:`ReferenceMatmul`), timed in the training rounds as one more
contender; a contender's *fraction of the matmul rate* is its counted FLOPs per median step
second over that rate.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tabulate import tabulate
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from pebench.config.cards import encoding_card, encoding_cards, task_card
from pebench.core.registry import build_encoding
from pebench.model.architecture import Architecture
from pebench.model.transformer import ModelConfig, Transformer
from pebench.records import paths as layout
from pebench.records.store import write_atomically
from pebench.running.devices import autocast, sync_device

if TYPE_CHECKING:  # pandas is imported where a table is made: every pebench command imports this module, few need it
    import pandas as pd

PEER_ENCODINGS = ("sinusoidal", "rope", "alibi", "t5")
VARIANTS = {  # name -> (card, params it changes)
    "flow+torchdiffeq": ("flow", {"backend": "torchdiffeq"}),  # the same RK4 through torchdiffeq.odeint: the host-timed loop's reference
    "flow+compile": ("flow", {"compile": True}),  # the RK4 step compiled (compiled in the untimed first step)
    "flow+adjoint": ("flow", {"backend": "torchdiffeq", "adjoint": True}),
}
VOCAB_SIZE = {Architecture.DECODER: 256, Architecture.ENCODER_DECODER: 8000}  # wmt_long's BPE vocabulary


@dataclass(frozen=True)
class Shape:
    """One benchmark setting: ``architecture`` and ``length`` (tokens per sequence, each stack)."""

    architecture: Architecture
    length: int

    def __str__(self) -> str:
        return f"{'dec' if self.architecture == Architecture.DECODER else 'enc-dec'} {self.length}"


FULL = (
    Shape(Architecture.DECODER, 64),
    Shape(Architecture.DECODER, 256),
    Shape(Architecture.DECODER, 1024),
    Shape(Architecture.ENCODER_DECODER, 64),
    Shape(Architecture.ENCODER_DECODER, 256),
)
QUICK = (Shape(Architecture.DECODER, 32), Shape(Architecture.ENCODER_DECODER, 32))


@dataclass
class Settings:
    """``tokens_per_batch`` per step (batch = tokens / tokens per example, at least 1),
    ``rounds`` timed rounds after one warm-up round, the ``model_tasks`` whose model cards
    size each architecture."""

    shapes: tuple[Shape, ...] = FULL
    tokens_per_batch: int = 8192
    rounds: int = 10  # timed rounds after the warm-up round (docs/throughput.md: why 10)
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    model_tasks: dict = field(default_factory=lambda: {Architecture.DECODER: "copy", Architecture.ENCODER_DECODER: "wmt_long"})
    encodings: tuple[str, ...] | None = None  # None: every card
    peer: bool = True

    def batch_size(self, shape: Shape) -> int:
        per_example = shape.length * (2 if shape.architecture == Architecture.ENCODER_DECODER else 1)
        return max(1, self.tokens_per_batch // per_example)


@dataclass
class Contender:
    """A model to measure: ``name`` (encoding card, variant or ``x-transformers:<option>``),
    ``implementation`` and ``build(shape)`` returning a module that maps inputs to logits."""

    name: str
    implementation: str
    build: Callable[[Shape], nn.Module]
    architectures: tuple[Architecture, ...] = (Architecture.DECODER, Architecture.ENCODER_DECODER)


def model_config(settings: Settings, architecture: Architecture) -> ModelConfig:
    """The model section of the task card that sizes ``architecture``."""
    section = dict(task_card(settings.model_tasks[architecture])["model"])
    section["architecture"], section["dropout"] = architecture, 0.0
    return ModelConfig(**section)


def pebench_contender(settings: Settings, name: str, card: dict) -> Contender:
    def build(shape: Shape) -> nn.Module:
        config = model_config(settings, shape.architecture)
        return Transformer(config, VOCAB_SIZE[shape.architecture], build_encoding(card, config.geometry(shape.length, shape.length)))

    return Contender(name, "pebench", build)


def peer_contender(settings: Settings, option: str) -> Contender:
    """x-transformers' decoder with the option closest to pebench's ``option`` encoding:
    ScaledSinusoidalEmbedding, rotary_pos_emb, alibi_pos_bias, rel_pos_bias (T5). Its
    attention runs on torch's SDPA (``attn_flash``) except with the T5 bias, which
    x-transformers computes in its own attention."""
    from x_transformers import Decoder, TransformerWrapper

    layer_options = {"rope": {"rotary_pos_emb": True}, "alibi": {"alibi_pos_bias": True}, "t5": {"rel_pos_bias": True}}.get(option, {})

    def build(shape: Shape) -> nn.Module:
        c = model_config(settings, Architecture.DECODER)
        layers = Decoder(
            dim=c.d_model,
            depth=c.n_layers,
            heads=c.n_heads,
            attn_dim_head=c.d_model // c.n_heads,
            ff_mult=c.d_ff // c.d_model,
            attn_flash=option != "t5",
            **layer_options,
        )
        return TransformerWrapper(
            num_tokens=VOCAB_SIZE[Architecture.DECODER],
            max_seq_len=shape.length,
            attn_layers=layers,
            tie_embedding=True,
            use_abs_pos_emb=option == "sinusoidal",
            scaled_sinu_pos_emb=option == "sinusoidal",
        )

    return Contender(f"x-transformers:{option}", "x-transformers", build, architectures=(Architecture.DECODER,))


def contenders(settings: Settings) -> list[Contender]:
    """Every encoding card (or those in ``settings.encodings``), the variants, then the peer
    when x-transformers is importable.

    Raises:
        UnknownNameError: for a requested encoding that is neither a card nor a variant.
    """
    names = list(settings.encodings or [*encoding_cards(), *VARIANTS])
    chosen = []
    for name in names:
        base, changes = VARIANTS.get(name, (name, {}))
        card = encoding_card(base)
        card["params"].update(changes)
        chosen.append(pebench_contender(settings, name, card))
    if settings.peer and _has_peer():
        chosen += [peer_contender(settings, option) for option in PEER_ENCODINGS if option in names]
    return chosen


def _has_peer() -> bool:
    try:
        import x_transformers  # noqa: F401
    except ImportError:
        return False
    return True


class Bench:
    """One contender built for one shape, with its batch and optimizer."""

    def __init__(self, contender: Contender, shape: Shape, settings: Settings, generator: torch.Generator):
        self.contender, self.shape, self.device = contender, shape, settings.device
        self.model = contender.build(shape).to(self.device)
        batch = settings.batch_size(shape)
        vocab = VOCAB_SIZE[shape.architecture]
        self.tokens = torch.randint(4, vocab, (batch, shape.length + 1), generator=generator).to(self.device)
        source = torch.randint(4, vocab, (batch, shape.length), generator=generator).to(self.device)
        self.inputs = (self.tokens[:, :-1],) + ((source,) if shape.architecture == Architecture.ENCODER_DECODER else ())
        self.keywords = {}
        if getattr(getattr(self.model, "encoding", None), "needs_structure", False):  # digits of 10-digit numbers: 1..10, again and again
            self.keywords["structure"] = (torch.arange(shape.length, device=self.device) % 10 + 1).expand(batch, -1)
        self.num_tokens = sum(t.numel() for t in self.inputs)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.loss_checked = False

    def train_step(self) -> None:
        """One training step. The first one (memory is measured there, before any timing)
        checks that the loss is finite: a contender whose model diverges at this shape is
        reported with that error, never timed.

        Raises:
            FloatingPointError: if the first step's loss is not finite.
        """
        self.model.train()
        with autocast(self.device):
            logits = self.model(*self.inputs, **self.keywords)
        loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), self.tokens[:, 1:].flatten())
        if not self.loss_checked:  # once: a read of the loss syncs the device
            value = loss.item()
            if not math.isfinite(value):
                raise FloatingPointError(f"the training loss of {self.contender.name} at {self.shape} is {value}: not timed")
            self.loss_checked = True
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def eval_forward(self) -> None:
        self.model.eval()
        with autocast(self.device):
            self.model(*self.inputs, **self.keywords)


def timed(call: Callable[[], None], device: torch.device) -> float:
    """Wall seconds of ``call()``, the device synchronised before and after."""
    sync_device(device)
    tick = time.perf_counter()
    call()
    sync_device(device)
    return time.perf_counter() - tick


@contextlib.contextmanager
def _stderr_silenced():
    """File descriptor 2 to the null device for the block, where native code writes too."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _mmap_threshold(size: int) -> None:
    """Set glibc's mmap threshold (see the module docstring); a no-op without glibc."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, size)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


MEASURING_THRESHOLD = 1 << 20  # every large tensor mapped on its own while memory is measured
TIMING_THRESHOLD = 32 << 20  # glibc's own upper bound, where its dynamic threshold settles


def peak_memory_mb(call: Callable[[], None], device: torch.device) -> float:
    """Tensor memory that ``call()`` needs above what is held before it, in MiB (see the
    module docstring)."""
    if device.type == "cuda":
        sync_device(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        call()
        sync_device(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
    with _stderr_silenced():  # the profiler logs a line as it starts and as it stops
        profiler.start()
    try:
        call()
    finally:
        with _stderr_silenced():
            profiler.stop()
    with tempfile.TemporaryDirectory() as folder:  # the trace is the public record of each allocation and free
        profiler.export_chrome_trace(f"{folder}/trace.json")
        events = json.loads(Path(f"{folder}/trace.json").read_text())["traceEvents"]
    changes = sorted((e["ts"], e["args"]["Bytes"]) for e in events if e.get("name") == "[memory]")
    held = peak = 0
    for _, change in changes:
        held += change
        peak = max(peak, held)
    return peak / 2**20


def _cpu_sdpa_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward_flops(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


class _WholeStep:
    """Stands in for FlopCounterMode's module tracker: every FLOP is the step's ("Global")."""

    parents = ("Global",)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class StepFlopCounter(FlopCounterMode):
    """torch's ``FlopCounterMode`` with two changes, both for what this benchmark runs:

    - SDPA's fused CPU kernel (``_scaled_dot_product_flash_attention_for_cpu`` and its backward)
      is counted with torch's own SDPA formulas: torch 2.13 registers them for the CUDA kernels
      only, so NoPE's attention on a CPU counted 0 FLOPs.
    - No per-module breakdown: its module tracker hooks the backward, and those hooks raise
      under torchdiffeq's adjoint (``flow+adjoint``), which calls ``torch.autograd.grad`` inside
      the backward ("A leaf node was passed to _will_engine_execute_node").
    """

    def __init__(self):
        aten = torch.ops.aten
        cpu_sdpa = {
            aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_flops,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward_flops,
        }
        super().__init__(display=False, custom_mapping=cpu_sdpa)
        self.mod_tracker = _WholeStep()


def step_flops(call: Callable[[], None]) -> int:
    """FLOPs of the matrix products, SDPA and convolutions that ``call()`` runs (:class:`StepFlopCounter`)."""
    with StepFlopCounter() as counter:
        call()
    return counter.get_total_flops()


def six_nd(model: nn.Module, shape: Shape, batch: int) -> int:
    """6ND, the cross-check of the count: 6 FLOPs per weight per token (2 forward, 4 backward;
    Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1, C = 6N without
    its attention term). N: the parameters outside ``nn.Embedding`` modules (the token
    embedding, tied to the output projection, and learned position tables); D = batch x length,
    the tokens each weight serves (in the encoder-decoder a weight serves one stack's)."""
    embedding = sum(p.numel() for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters(recurse=False))
    return 6 * (sum(p.numel() for p in model.parameters()) - embedding) * batch * shape.length


class ReferenceMatmul:
    """The machine's matmul at a shape: the model's largest product, ``[batch x length, d_model]
    @ [d_model, n]`` with n the larger of d_ff (the feed-forward product) and the vocabulary (the
    output projection): the feed-forward's at d_model 64 (d_ff = vocabulary = 256), the output
    projection's in the encoder-decoder (vocabulary 8,000 against d_ff 1,024). Run under the
    benchmark's autocast."""

    def __init__(self, shape: Shape, settings: Settings):
        config = model_config(settings, shape.architecture)
        self.rows, self.inner = settings.batch_size(shape) * shape.length, config.d_model
        self.columns = max(config.d_ff, VOCAB_SIZE[shape.architecture])
        generator = torch.Generator().manual_seed(0)
        self.device = settings.device
        self.left = torch.randn(self.rows, self.inner, generator=generator).to(self.device)
        self.right = torch.randn(self.inner, self.columns, generator=generator).to(self.device)
        self.flops = 2 * self.rows * self.inner * self.columns

    def __str__(self) -> str:
        return f"[{self.rows} x {self.inner}] @ [{self.inner} x {self.columns}]"  # no thousands' commas: a CSV cell

    def __call__(self) -> None:
        with autocast(self.device):
            torch.mm(self.left, self.right)


def build_benches(shape: Shape, chosen: list[Contender], settings: Settings) -> tuple[dict[str, dict], list[Bench]]:
    """The contenders that serve ``shape``'s architecture, built with the same batch: a row for
    each (name -> row) and a :class:`Bench` for each that could be built."""
    rows, benches = {}, []
    for contender in (c for c in chosen if shape.architecture in c.architectures):
        row = {
            "contender": contender.name,
            "implementation": contender.implementation,
            "shape": str(shape),
            "architecture": shape.architecture,
            "length": shape.length,
            "batch": settings.batch_size(shape),
        }
        try:
            bench = Bench(contender, shape, settings, torch.Generator().manual_seed(0))  # the same batch for all
            row["parameters"] = sum(p.numel() for p in bench.model.parameters())
            benches.append(bench)
        except Exception as error:  # a contender that cannot run this shape is reported, not fatal
            row["error"] = _describe(error)
        rows[contender.name] = row
    return rows, benches


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0][:160]


def measure_memory(shape: Shape, chosen: list[Contender], settings: Settings) -> dict[str, dict]:
    """Rows (name -> row) with each contender's peak memory in its first training step and its
    first evaluation forward at ``shape``, then the FLOPs of its next training step (counted:
    :func:`step_flops`; 6ND: :func:`six_nd`), or the error that stopped it."""
    rows, benches = build_benches(shape, chosen, settings)
    for bench in benches:
        row = rows[bench.contender.name]
        try:
            row["train_peak_mb"] = peak_memory_mb(bench.train_step, settings.device)
            row["eval_peak_mb"] = peak_memory_mb(bench.eval_forward, settings.device)
            row["train_flops"] = step_flops(bench.train_step)
            row["train_flops_6nd"] = six_nd(bench.model, shape, settings.batch_size(shape))
        except Exception as error:
            row["error"] = _describe(error)
    return rows


MATMUL = " matmul"  # the reference product's key among the contenders' names (a space: no card's name)


def measure_speed(shape: Shape, chosen: list[Contender], settings: Settings, rows: dict[str, dict], progress: Callable[[str], None]) -> None:
    """Interleaved timed rounds at ``shape`` over the contenders that ran in
    :func:`measure_memory`, after one untimed warm-up round, the :class:`ReferenceMatmul` timed
    in the training rounds beside them; adds seconds, tokens/s, FLOP/s and the fraction of the
    matmul rate to ``rows``."""
    benches = [b for b in build_benches(shape, chosen, settings)[1] if "error" not in rows[b.contender.name]]
    matmul = ReferenceMatmul(shape, settings)
    seconds = {kind: {b.contender.name: [] for b in benches} for kind in ("train", "eval")}
    seconds["train"][MATMUL] = []
    for kind in ("train", "eval"):  # evaluation after training, so that nothing changes the weights between its rounds
        calls = [(b.contender.name, b.train_step if kind == "train" else b.eval_forward) for b in benches]
        calls += [(MATMUL, matmul)] if kind == "train" and benches else []  # under the same load as the steps
        for _, call in calls:  # warm-up; for evaluation it also refills the caches training invalidated (FLOATER's solution)
            call()
        for round_index in range(settings.rounds):
            progress(f"{shape}: {kind} round {round_index + 1}/{settings.rounds}")
            shift = round_index % max(1, len(calls))
            for name, call in calls[shift:] + calls[:shift]:
                seconds[kind][name].append(timed(call, settings.device))
    for bench in benches:
        row = rows[bench.contender.name]
        row["train_seconds"] = statistics.median(seconds["train"][bench.contender.name])
        row["eval_seconds"] = statistics.median(seconds["eval"][bench.contender.name])
        row["train_tokens_per_second"] = bench.num_tokens / row["train_seconds"]
        row["eval_tokens_per_second"] = bench.num_tokens / row["eval_seconds"]
        row["matmul"] = str(matmul)
        row["matmul_gflops_per_second"] = matmul.flops / statistics.median(seconds["train"][MATMUL]) / 1e9
        row["train_gflops_per_second"] = row["train_flops"] / row["train_seconds"] / 1e9
        row["matmul_fraction"] = row["train_gflops_per_second"] / row["matmul_gflops_per_second"]


def with_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Add each row's step-time ratios to NoPE in the same shape (``train_vs_nope``,
    ``eval_vs_nope``) and, for pebench rows with a peer, pebench's training throughput over
    the peer's (``train_vs_peer``)."""
    table = table.copy()
    for kind in ("train", "eval"):
        nope = table[table.contender == "nope"].set_index("shape")[f"{kind}_seconds"]
        table[f"{kind}_vs_nope"] = table[f"{kind}_seconds"] / table["shape"].map(nope)
    peer = table[table.implementation == "x-transformers"]
    peer_speed = {(row.contender.split(":", 1)[1], row.shape): row.train_tokens_per_second for row in peer.itertuples()}
    table["train_vs_peer"] = [
        row.train_tokens_per_second / peer_speed[(row.contender, row.shape)]
        if (row.contender, row.shape) in peer_speed and row.implementation == "pebench"
        else float("nan")
        for row in table.itertuples()
    ]
    return table


def run_benchmark(
    settings: Settings,
    chosen: list[Contender],
    progress: Callable[[str], None] = lambda message: None,
    shape_done: Callable[[pd.DataFrame], None] = lambda table: None,
) -> pd.DataFrame:
    """Measure ``chosen`` (:func:`contenders`) at every shape; one row per (contender, shape),
    with ratios. Memory is measured at every shape first, then the shapes are timed one after
    another; after each, ``shape_done`` is given the table of the shapes timed so far (the last
    call's table is the one returned), so that a caller can save it before a long run ends or
    is stopped."""
    cpu = settings.device.type == "cpu"
    if cpu:
        _mmap_threshold(MEASURING_THRESHOLD)
    rows = {}
    for shape in settings.shapes:  # memory first, every shape, outside the timed rounds (the profiler slows a call)
        progress(f"{shape}: memory")
        rows[shape] = measure_memory(shape, chosen, settings)
    if cpu:
        _mmap_threshold(TIMING_THRESHOLD)
    timed: list[dict] = []
    for shape in settings.shapes:
        measure_speed(shape, chosen, settings, rows[shape], progress)
        timed += rows[shape].values()
        table = benchmark_table(timed)
        shape_done(table)
    return table


FLOP_COLUMNS = ("train_flops", "train_flops_6nd", "train_gflops_per_second", "matmul_gflops_per_second", "matmul_fraction")


def benchmark_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as a table with every figure's column (missing figures NaN) and the ratios."""
    import pandas as pd

    table = pd.DataFrame(rows)
    figures = ("train_seconds", "eval_seconds", "train_tokens_per_second", "eval_tokens_per_second", *FLOP_COLUMNS)
    for column in (*figures, "error"):
        if column not in table:
            table[column] = float("nan") if column != "error" else None
    return with_ratios(table)


def _format(value, pattern: str) -> str:
    import pandas as pd

    return "—" if value is None or pd.isna(value) else format(value, pattern)


def render(table: pd.DataFrame, table_format: str = "github") -> str:
    """Two tables: absolute figures per contender and shape, then ratios to NoPE (and to the
    peer) with one column per shape."""
    import pandas as pd

    absolute = pd.DataFrame(
        {
            "contender": table.contender,
            "shape": table["shape"],
            "batch": table.batch,
            "train tok/s": table.train_tokens_per_second.map(lambda v: _format(v, ",.0f")),
            "eval tok/s": table.eval_tokens_per_second.map(lambda v: _format(v, ",.0f")),
            "GFLOP/step": table.train_flops.map(lambda v: _format(v / 1e9, ",.3g")),
            "6ND GFLOP": table.train_flops_6nd.map(lambda v: _format(v / 1e9, ",.3g")),
            "GFLOP/s": table.train_gflops_per_second.map(lambda v: _format(v, ",.3g")),
            "of matmul rate": table.matmul_fraction.map(lambda v: _format(v, ".2f")),
            "train peak MiB": table.train_peak_mb.map(lambda v: _format(v, ",.0f")) if "train_peak_mb" in table else "—",
            "eval peak MiB": table.eval_peak_mb.map(lambda v: _format(v, ",.0f")) if "eval_peak_mb" in table else "—",
            "note": table["error"].fillna(""),
        }
    )
    shapes = list(dict.fromkeys(table["shape"]))
    ratios = []
    for name, rows in table.groupby("contender", sort=False):
        by_shape = rows.set_index("shape")
        ratio_row = {"contender": name}
        for shape in shapes:
            if shape in by_shape.index:
                r = by_shape.loc[shape]
                ratio_row[f"{shape} train"] = _format(r.train_vs_nope, ".2f")
                ratio_row[f"{shape} eval"] = _format(r.eval_vs_nope, ".2f")
        peer = rows.train_vs_peer.dropna()
        if len(peer):
            ratio_row["train vs x-transformers"] = ", ".join(f"{s}: {v:.2f}" for s, v in zip(rows.loc[peer.index, "shape"], peer))
        ratios.append(ratio_row)
    ratio_table = pd.DataFrame(ratios).fillna("—")
    return (
        "Absolute figures (median of the timed rounds; GFLOP/step: a training step's FLOPs counted by torch's"
        + " FlopCounterMode, 6ND beside it; GFLOP/s: GFLOP/step over the median step time; of matmul rate: GFLOP/s over"
        + " the matmul rate below)\n\n"
        + tabulate(absolute, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)
        + "\n\n"
        + matmul_rates(table)
        + "\n\nStep time relative to NoPE in the same shape (1.10 = 10% slower); last column: pebench's training"
        + " tokens/s over x-transformers' with the same option (> 1 = pebench faster)\n\n"
        + tabulate(ratio_table, headers="keys", tablefmt=table_format, showindex=False, disable_numparse=True)
        + "\n"
    )


def matmul_rates(table: pd.DataFrame) -> str:
    """One line: each timed shape's matmul rate and the product it was timed on (:class:`ReferenceMatmul`)."""
    import pandas as pd

    rates = table.dropna(subset=["matmul_gflops_per_second"]).drop_duplicates("shape") if "matmul" in table else table.iloc[:0]
    measured = [f"{row.shape}: {row.matmul_gflops_per_second:,.3g} GFLOP/s on {row.matmul}" for row in rates.itertuples() if not pd.isna(row.matmul)]
    return "Matmul rate (the model's largest product, median of the training rounds): " + ("; ".join(measured) or "—")


SUMMARY = (  # (shape, column, heading, format): the README's table
    ("dec 256", "train_tokens_per_second", "dec 256 train tok/s", ",.0f"),
    ("dec 256", "train_vs_nope", "train × NoPE", ".2f"),
    ("dec 256", "eval_vs_nope", "eval × NoPE", ".2f"),
    ("dec 1024", "train_vs_nope", "dec 1024 train × NoPE", ".2f"),
    ("dec 1024", "eval_peak_mb", "dec 1024 eval MiB", ",.0f"),
    ("enc-dec 256", "train_tokens_per_second", "enc-dec 256 train tok/s", ",.0f"),
    ("enc-dec 256", "train_vs_nope", "train × NoPE", ".2f"),
    ("enc-dec 256", "eval_vs_nope", "eval × NoPE", ".2f"),
    ("dec 256", "train_vs_peer", "vs x-transformers (dec 256)", ".2f"),
)


def summary(table: pd.DataFrame) -> str | None:
    """One row per contender at the headline shapes (length 256 of both architectures, and the
    decoder at 1,024), as the README shows it: the columns of :data:`SUMMARY` that were measured;
    None if no headline shape was."""
    columns = [c for c in SUMMARY if c[0] in set(table["shape"])]
    if not columns:
        return None
    rows = []
    for name, by_contender in table.groupby("contender", sort=False):
        by_shape = by_contender.set_index("shape")
        rows.append([name] + [_format(by_shape[column].get(shape), pattern) for shape, column, _, pattern in columns])
    headers = ["contender"] + [heading for _, _, heading, _ in columns]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) + "\n"


def environment(settings: Settings) -> dict:
    device = settings.device
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
        "tokens_per_batch": settings.tokens_per_batch,
        "rounds": settings.rounds,
        "warmup_rounds": 1,
        "model_tasks": {str(architecture): task for architecture, task in settings.model_tasks.items()},  # the cards' strings as keys
        "date": time.strftime("%Y-%m-%d"),
    }


FLOPS_SIGNATURE = {  # how the FLOP columns were computed, saved beside them
    "train_flops": "torch.utils.flop_counter.FlopCounterMode over one training step (forward, backward, AdamW step), "
    "plus SDPA's fused CPU kernel; matrix products, SDPA and convolutions only",
    "train_flops_6nd": "6 x parameters outside nn.Embedding x batch x length (Kaplan et al. 2020, without the attention term)",
    "matmul_gflops_per_second": "[batch x length, d_model] @ [d_model, max(d_ff, vocabulary)], median of the training rounds",
    "matmul_fraction": "train_flops / train_seconds / matmul rate",
}


def write(table: pd.DataFrame, settings: Settings, out: Path, command: str) -> list[Path]:
    """Save under ``out`` the figures (``throughput.csv``), the tables with the command and
    environment (``throughput.md``), the command, environment and how FLOPs were counted
    (``throughput.json``) and, when a headline shape was measured, :func:`summary`
    (``summary.md``; an older one is removed otherwise); return the paths. Each file is replaced atomically."""
    env = environment(settings)
    header = f"Command: `{command}`\n\nEnvironment: " + ", ".join(f"{k} {v}" for k, v in env.items()) + "\n\n"
    files = {
        "throughput.md": "# Throughput\n\n" + header + render(table),
        "throughput.csv": table.to_csv(index=False, float_format="%.6g"),
        "throughput.json": json.dumps({"command": command, "environment": env, "flops": FLOPS_SIGNATURE}, indent=2) + "\n",
        "summary.md": summary(table),
    }
    for name, text in files.items():
        if text is None:
            (out / name).unlink(missing_ok=True)  # not this table's: a summary of an earlier run
        else:
            write_atomically(out / name, text)
    return [out / name for name, text in files.items() if text is not None]


def load(results: Path) -> pd.DataFrame | None:
    """The saved benchmark table under ``<results>/throughput``, or None if never run."""
    import pandas as pd

    path = layout.throughput_dir(results) / "throughput.csv"
    return pd.read_csv(path) if path.is_file() else None
