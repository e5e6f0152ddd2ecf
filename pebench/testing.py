"""A conformance kit for encoding plugins (the idea of scikit-learn's ``check_estimator``).

Every built-in encoding passes these checks; a plugin should too. Each check builds small seeded
models around the plugin, in each architecture (decoder-only, encoder-decoder, encoder-only), and
raises AssertionError naming the property that broke:

- ``finite_gradients``: a training step's loss and every gradient are finite;
- ``causality``: in a decoder, changing tokens after position i leaves the outputs up to i
  unchanged (nothing leaks from the future);
- ``batch_independence``: an example's outputs do not depend on the other examples of its batch
  (the same example beside other examples of its length);
- ``padding_invariance``: an example alone and the same example padded in a longer batch give
  the same outputs (an encoding that draws positions at evaluation draws them from the same
  seed in both, so each example must get its own draw, not its batch's);
- ``cached_decoding``: decoding token by token with cached keys and values gives the logits of
  a full forward pass over the same positions;
- ``max_positions``: an encoding with ``max_positions`` refuses one position more with
  :class:`pebench.PositionLimitError` naming the length, and accepts ``max_positions``.

An encoding that needs structural positions (``needs_structure``) is given some in every check
(each source symbol numbered from 1, as the digits of a number) and checked in the decoder-only
and encoder-only models, the ones structural positions serve.

Use it in pytest, one test per check::

    import pebench.testing
    from my_package import MyEncoding

    @pytest.mark.parametrize("check", pebench.testing.checks(MyEncoding, {"alpha": 0.5}), ids=str)
    def test_conformance(check):
        check()

or all at once: ``pebench.testing.check_encoding(MyEncoding)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from pebench.encodings.base import PositionalEncoding, PositionLimitError
from pebench.model.architecture import Architecture
from pebench.model.batching import STRUCTURED, pack, prompts
from pebench.model.transformer import ModelConfig, Transformer
from pebench.running.evaluation import seeded
from pebench.tasks.base import Example

ARCHITECTURES = tuple(Architecture)
VOCAB = 24
TOLERANCE = 1e-4  # relative, float32: outputs equal to round-off


@dataclass(frozen=True)
class Check:
    """One property of one plugin in one architecture; call it to run it."""

    name: str
    architecture: Architecture
    run: Callable[[], None]

    def __call__(self) -> None:
        try:
            self.run()
        except AssertionError as error:
            raise AssertionError(f"{self}: {error}") from None

    def __str__(self) -> str:
        return f"{self.name}[{self.architecture}]"


def _model(cls: type[PositionalEncoding], params: dict, architecture: Architecture, max_length: int = 64, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig(architecture=architecture, d_model=32, n_heads=4, n_layers=2, d_ff=64)
    return Transformer(config, VOCAB, cls(config.geometry(max_length, 16), **params))


def _examples(lengths: list[int], seed: int = 0) -> list[Example]:
    """Random examples, with structural positions (each source symbol numbered from 1)."""
    rng = random.Random(seed)

    def symbols(n: int) -> tuple[int, ...]:
        return tuple(rng.randrange(VOCAB - 4) for _ in range(n))

    return [Example(symbols(n), symbols(n), n, structure=tuple(range(1, n + 1))) for n in lengths]


def _structure(tokens: torch.Tensor) -> torch.Tensor:
    """Structural positions for raw token rows ``[b, s]``: 1, 2, ..., s in every row."""
    return torch.arange(1, tokens.shape[1] + 1).expand(tokens.shape[0], -1)


def _close(value: torch.Tensor, reference: torch.Tensor, what: str) -> None:
    error = ((value - reference).norm() / reference.norm().clamp_min(1e-12)).item()
    assert error < TOLERANCE, f"{what} differ by {error:.2e} (relative; at most {TOLERANCE:g} allowed)"


def _forward(model: Transformer, examples: list[Example], architecture: str) -> torch.Tensor:
    batch = pack(examples, architecture)
    with torch.no_grad(), seeded("pebench.testing", torch.device("cpu")):
        return model(batch.tokens, batch.source, batch.identity, batch.structure)


def finite_gradients(cls, params, architecture) -> None:
    model = _model(cls, params, architecture).train()
    batch = pack(_examples([3, 9, 6]), architecture)
    logits = model(batch.tokens, batch.source, structure=batch.structure)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=-100)
    loss.backward()
    assert torch.isfinite(loss), f"the loss is {loss.item()}"
    bad = [name for name, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not bad, f"gradients not finite in {', '.join(bad)}"


def causality(cls, params, architecture) -> None:
    model = _model(cls, params, architecture).eval()
    tokens = torch.randint(4, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, 7:] = (changed[:, 7:] - 3) % (VOCAB - 4) + 4  # other tokens from position 7 on
    source = torch.randint(4, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1)) if architecture == Architecture.ENCODER_DECODER else None
    identity = tokens[:, :7]  # the example is the same one: what it has before position 7 (its prompt)
    with torch.no_grad(), seeded("causality", torch.device("cpu")):
        before = model(tokens, source, identity, _structure(tokens))
    with torch.no_grad(), seeded("causality", torch.device("cpu")):
        after = model(changed, source, identity, _structure(tokens))
    _close(after[:, :7], before[:, :7], "outputs at positions 0-6 after changing tokens 7-11 (the future leaks into the past)")


def batch_independence(cls, params, architecture) -> None:
    model = _model(cls, params, architecture).eval()
    example, *companions = _examples([8, 8, 8, 8, 8])
    with_some = _forward(model, [example, *companions[:2]], architecture)
    with_others = _forward(model, [example, *companions[2:]], architecture)
    _close(with_others[0], with_some[0], "an example's outputs beside other examples of its length")


def padding_invariance(cls, params, architecture) -> None:
    model = _model(cls, params, architecture).eval()
    examples = _examples([3, 11, 7])
    alone, batched = _forward(model, examples[:1], architecture), _forward(model, examples, architecture)
    _close(batched[0, : alone.shape[1]], alone[0], "an example's outputs alone and padded in a longer batch")


def cached_decoding(cls, params, architecture) -> None:
    model = _model(cls, params, architecture).eval()
    [example] = _examples([6])
    if architecture == Architecture.DECODER:
        prompt, _ = prompts([example])
        tokens = torch.cat((prompt, torch.randint(4, VOCAB, (1, 5), generator=torch.Generator().manual_seed(2))), dim=1)
        source, memory = None, None
    else:
        tokens = torch.randint(4, VOCAB, (1, 8), generator=torch.Generator().manual_seed(2))
        source = pack([example], architecture).source
    with torch.no_grad(), seeded("cached", torch.device("cpu")):
        full = model(tokens, source, structure=_structure(tokens))
    with torch.no_grad(), seeded("cached", torch.device("cpu")):  # random positions: drawn in the forward pass's order
        pos = model.positions(tokens, source, structure=_structure(tokens))
        if source is not None:
            memory = model.encode(source)
        cache, first = {}, 3
        pieces = [model.decode(tokens[:, :first], pos[..., :first], cache, memory)]
        pieces += [model.decode(tokens[:, i : i + 1], pos[..., i : i + 1], cache, memory) for i in range(first, tokens.shape[1])]
    _close(torch.cat(pieces, 1), full, "logits of cached decoding and of a full forward pass over the same positions")


def max_positions(cls, params, architecture) -> None:
    model = _model(cls, params, architecture, max_length=40)
    limit = model.encoding.max_positions
    if limit is None:
        return
    model.encoding.positions(limit)
    try:
        model.encoding.positions(limit + 1)
    except PositionLimitError as error:
        assert str(limit + 1) in str(error), f"the error does not name the length asked for ({limit + 1}): {error}"
        return
    raise AssertionError(f"positions({limit + 1}) did not raise PositionLimitError (max_positions = {limit})")


CHECKS = {f.__name__: f for f in (finite_gradients, causality, batch_independence, padding_invariance, cached_decoding, max_positions)}


def checks(cls: type[PositionalEncoding], params: dict | None = None, architectures: tuple[Architecture, ...] | None = None) -> list[Check]:
    """Every check of the kit for the plugin class ``cls`` built with ``params``, per
    architecture (:class:`~pebench.model.architecture.Architecture` members or their values): by
    default decoder-only, encoder-decoder and encoder-only (only the first and the last for an
    encoding that needs structural positions); ``causality`` in the decoder-only one, where
    attention is causal; no ``cached_decoding`` in the encoder-only one, which outputs in one
    pass."""
    params = dict(params or {})
    architectures = architectures or (STRUCTURED if cls.needs_structure else ARCHITECTURES)
    found = []
    for name, check in CHECKS.items():
        for architecture in architectures:
            one_pass = architecture == Architecture.ENCODER  # nothing is decoded
            if (name == "causality" and architecture != Architecture.DECODER) or (name == "cached_decoding" and one_pass):
                continue
            found.append(Check(name, architecture, lambda check=check, architecture=architecture: check(cls, params, architecture)))
    return found


def check_encoding(cls: type[PositionalEncoding], params: dict | None = None) -> None:
    """Run every check; raise AssertionError naming the first property that breaks."""
    for check in checks(cls, params):
        check()


__all__ = ["CHECKS", "Check", "check_encoding", "checks"]
