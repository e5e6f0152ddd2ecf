"""The transformer every encoding is trained in: pre-LN, decoder-only, encoder-decoder or
encoder-only.

Pre-LN blocks (Xiong et al. 2020, arXiv:2002.04745): x + Attn(LN(x)), then x + FFN(LN(x)),
a final LayerNorm, GELU feed-forward, token embeddings scaled by sqrt(d) (Vaswani et al. 2017,
sec. 3.4) and tied with the output projection. Position enters only through the hooks of the
encoding plugin (see :mod:`pebench.encodings.base`); attention runs on
``torch.nn.functional.scaled_dot_product_attention`` unless the plugin owns it.

The encoder-only model (Delétang et al. 2023's format) reads the input followed by one
placeholder per output position with bidirectional attention and predicts every output token at
its placeholder in one pass; its logits are per position, not shifted.
Padding is on the right and token id 0. Padded keys never receive weight from a real token (in
causal self-attention they lie in its future; encoder and cross-attention mask them); every
query row keeps at least one allowed key (position 0 is never padding, and causal rows see
themselves), so no row is NaN and an example's outputs do not depend on the longer examples
batched with it. Positions come from the encoding's ``batch_positions``: ``[s]`` shared by the
batch, or ``[b, s]`` drawn for each example (randomized), which every position tensor below may
be.
Shapes: b batch, s sequence (s_s source, s_t target), d model width, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from pebench.encodings.attention import autocast_state, causal_mask
from pebench.encodings.base import Geometry, PositionalEncoding, Site, StructureError
from pebench.model.architecture import Architecture

PAD = 0


@dataclass(frozen=True)
class ModelConfig:
    """Model shape. ``architecture``: an :class:`~pebench.model.architecture.Architecture` or its
    value (a card's ``"decoder"``, ``"encoder_decoder"`` or ``"encoder"``), held as the member;
    ``n_layers`` counts the blocks of each stack.

    Raises:
        ValueError: for an unknown architecture, or a ``d_model`` that ``n_heads`` does not divide.
    """

    architecture: Architecture = Architecture.DECODER
    d_model: int = field(default=64, metadata={"at_least": 1})  # metadata: the range a task card may set
    n_heads: int = field(default=4, metadata={"at_least": 1})
    n_layers: int = field(default=2, metadata={"at_least": 1})
    d_ff: int = field(default=256, metadata={"at_least": 1})
    dropout: float = field(default=0.0, metadata={"at_least": 0, "below": 1})

    def __post_init__(self):
        known = tuple(member.value for member in Architecture)
        if self.architecture not in known:
            raise ValueError(f"architecture must be one of {known}; got {self.architecture!r}")
        object.__setattr__(self, "architecture", Architecture(self.architecture))  # frozen: the card's string becomes its member
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")

    def sites(self) -> tuple[Site, ...]:
        """Every attention site of the model, in the order the model runs them."""
        if self.architecture == Architecture.DECODER:
            return tuple(Site("decoder", i, "self") for i in range(self.n_layers))
        encoder = [Site("encoder", i, "self") for i in range(self.n_layers)]
        if self.architecture == Architecture.ENCODER:
            return tuple(encoder)
        decoder = [Site("decoder", i, kind) for i in range(self.n_layers) for kind in ("self", "cross")]
        return tuple(encoder + decoder)

    def geometry(self, max_length: int, train_length: int | None = None) -> Geometry:
        return Geometry(self.d_model, self.n_heads, self.sites(), max_length, train_length)


@dataclass
class Memory:
    """The encoder's output for cross-attention: states ``[b, s_s, d]``, positions ``[s_s]`` (or
    ``[b, s_s]``), allowed keys ``[b, 1, 1, s_s]`` (False at padding)."""

    states: Tensor
    pos: Tensor
    allowed: Tensor

    def select(self, index: Tensor) -> Memory:
        """The rows ``index`` of the batch (beam search expands and reorders with it)."""
        pos = self.pos.index_select(0, index) if self.pos.dim() == 2 else self.pos
        return Memory(self.states.index_select(0, index), pos, self.allowed.index_select(0, index))


KVCache = dict  # Site -> {"k": [b, h, s, d_h], "v": [b, h, s, d_h], "pos": [s] or [b, s], "state": [b, h, s] or None}; see Transformer.decode


class Attention(nn.Module):
    """Multi-head attention at one site, position handled by the encoding's hooks."""

    def __init__(self, config: ModelConfig, site: Site):
        super().__init__()
        self.site, self.n_heads = site, config.n_heads
        self.query = nn.Linear(config.d_model, config.d_model)
        self.key_value = nn.Linear(config.d_model, 2 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(
        self, x: Tensor, memory: Tensor, q_pos: Tensor, k_pos: Tensor, allowed: Tensor, encoding: PositionalEncoding, cache: KVCache | None = None
    ) -> Tensor:
        """x: ``[b, s_q, d]`` queries, memory: ``[b, s_k, d]`` keys and values, allowed:
        bool broadcastable to ``[b, 1, s_q, k]``. With a cache, self-attention appends this call's
        keys and values to it and attends over all of them; cross-attention computes the
        encoder's keys and values once. Returns ``[b, s_q, d]``."""
        b, s_q, d = x.shape
        q = project(self.query, x, encoding.query_bias(q_pos, self.site)).view(b, s_q, self.n_heads, -1).transpose(1, 2)
        q = encoding.project_query(q, q_pos, self.site)  # [b, h, s_q, d_h]
        entry = cache.get(self.site) if cache is not None else None
        if entry is not None and self.site.kind == "cross":
            k, v, k_pos, state = entry["k"], entry["v"], entry["pos"], entry["state"]
        else:
            kv = project(self.key_value, memory, encoding.key_value_bias(k_pos, self.site))  # [b, s_k, 2 d]
            k, v = kv.view(b, memory.shape[1], 2, self.n_heads, -1).permute(2, 0, 3, 1, 4)  # 2 x [b, h, s_k, d_h]
            k, v = encoding.project_key_value(k, v, k_pos, self.site)
            state = encoding.key_state(memory, k_pos, self.site)  # [b, h, s_k] or None
            if entry is not None:  # self-attention: append the new tokens
                k, v, k_pos = torch.cat((entry["k"], k), 2), torch.cat((entry["v"], v), 2), torch.cat((entry["pos"], k_pos), -1)
                state = None if state is None else torch.cat((entry["state"], state), 2)
            if cache is not None:
                cache[self.site] = {"k": k, "v": v, "pos": k_pos, "state": state}
        causal = self.site.stack == "decoder" and self.site.kind == "self" and cache is None  # a full pass under causal_mask
        extra = {} if state is None else {"key_state": state}
        out = encoding.attend(q, k, v, q_pos, k_pos, allowed, self.site, causal, **extra)  # [b, h, s_q, d_h]
        return self.out(out.transpose(1, 2).reshape(b, s_q, d))


def project(linear: nn.Linear, x: Tensor, bias: Tensor | None) -> Tensor:
    """``linear(x)`` for x ``[b, s, d_in]``, plus ``bias`` ``[s, d_out]``, one per position, when
    given (:meth:`PositionalEncoding.query_bias`, :meth:`PositionalEncoding.key_value_bias`).
    Returns ``[b, s, d_out]``.

    The bias is added within the product, as ``nn.Linear`` adds its own: one ``baddbmm`` whose
    output starts from the biases, where a separate addition would be a pass of its own over the
    output and over its gradient (``docs/throughput.md`` has the timings). The weight and the biases are cast to the product's dtype (autocast's,
    else the weight's) before they are broadcast over the batch, so that the cast copies them
    once, not once per example.

    Raises:
        ValueError: if ``bias`` is not ``[s, d_out]``.
    """
    if bias is None:
        return linear(x)
    if bias.shape != (x.shape[1], linear.out_features):
        raise ValueError(
            f"a projection bias must be [sequence, {linear.out_features}] = [{x.shape[1]}, {linear.out_features}]; "
            f"the encoding's query_bias or key_value_bias returned {list(bias.shape)}"
        )
    autocast = autocast_state(x.device)
    dtype = autocast["dtype"] if autocast["enabled"] else linear.weight.dtype
    start = (linear.bias + bias.to(linear.bias.dtype)).to(dtype)  # [s, d_out]
    batch = x.shape[0]
    return torch.baddbmm(start.expand(batch, -1, -1), x.to(dtype), linear.weight.to(dtype).t().expand(batch, -1, -1))


class Block(nn.Module):
    """Pre-LN block: self-attention, cross-attention (encoder-decoder's decoder only), FFN."""

    def __init__(self, config: ModelConfig, stack: str, layer: int, cross: bool):
        super().__init__()
        self.self_norm, self.self_attention = nn.LayerNorm(config.d_model), Attention(config, Site(stack, layer, "self"))
        self.cross_norm = nn.LayerNorm(config.d_model) if cross else None
        self.cross_attention = Attention(config, Site(stack, layer, "cross")) if cross else None
        self.ffn_norm = nn.LayerNorm(config.d_model)
        self.ffn = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model))
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, pos: Tensor, allowed: Tensor, encoding: PositionalEncoding, memory: Memory | None = None, cache: KVCache | None = None
    ) -> Tensor:
        """x: ``[b, s, d]``, pos: ``[s]``, allowed: self-attention mask. Returns ``[b, s, d]``."""
        h = self.self_norm(x)
        x = x + self.dropout(self.self_attention(h, h, pos, pos, allowed, encoding, cache))
        if self.cross_attention is not None:
            h = self.cross_norm(x)
            x = x + self.dropout(self.cross_attention(h, memory.states, pos, memory.pos, memory.allowed, encoding, cache))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class Transformer(nn.Module):
    """The benchmark model.

    Args:
        config: model shape.
        vocab_size: V, including the special tokens (id 0 is padding).
        encoding: the positional-encoding plugin, built for ``config.geometry(...)``.
    """

    def __init__(self, config: ModelConfig, vocab_size: int, encoding: PositionalEncoding):
        super().__init__()
        self.config, self.encoding = config, encoding
        self.embedding = nn.Embedding(vocab_size, config.d_model, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, std=config.d_model**-0.5)
        encoder_decoder, has_encoder = config.architecture == Architecture.ENCODER_DECODER, config.architecture != Architecture.DECODER
        self.encoder = nn.ModuleList(Block(config, "encoder", i, False) for i in range(config.n_layers)) if has_encoder else None
        self.encoder_norm = nn.LayerNorm(config.d_model) if has_encoder else None
        has_decoder = config.architecture != Architecture.ENCODER
        self.decoder = nn.ModuleList(Block(config, "decoder", i, encoder_decoder) for i in range(config.n_layers)) if has_decoder else None
        self.decoder_norm = nn.LayerNorm(config.d_model) if has_decoder else None

    def forward(self, tokens: Tensor, source: Tensor | None = None, identity: Tensor | None = None, structure: Tensor | None = None) -> Tensor:
        """Logits for whole sequences (training, teacher-forced evaluation, one-pass outputs).

        Args:
            tokens: decoder input ``[b, s_t]`` long, right-padded with 0 (the encoder-only
                model's whole input: the source and its placeholders).
            source: encoder input ``[b, s_s]`` (encoder-decoder only), right-padded with 0.
            identity: ``[b, *]`` rows identifying each example (:attr:`Batch.identity
                <pebench.model.batching.Batch.identity>`: its source or prompt), from which an
                encoding that draws positions at evaluation seeds each example's draw; default
                ``source``, else ``tokens``.
            structure: ``[b, s_t]`` long, the structural position of each token of ``tokens``
                (:func:`pebench.model.batching.structure_rows`), for an encoding that needs them;
                ignored by the others.
        Returns:
            ``[b, s_t, V]`` logits; row i predicts token i + 1 (encoder-only: token i).
        Raises:
            PositionLimitError: if the encoding cannot represent the sequence length.
            StructureError: if the encoding needs structural positions and none are given.
        """
        identity = identity if identity is not None else source if source is not None else tokens
        if self.decoder is None:  # encoder-only: bidirectional, padded keys masked
            pos = self.positions(tokens, identity, structure=structure)
            self.encoding.prepare(tokens.shape[1], tokens.device)
            return self._encode(tokens, pos).states @ self.embedding.weight.T  # [b, s, V]
        pos = self.positions(tokens, identity, structure=structure)
        source_pos = self.positions(source, identity, "encoder") if source is not None else pos
        # once per pass, from the lengths alone (read on the host: no device sync)
        self.encoding.prepare(max(tokens.shape[1], source.shape[1] if source is not None else 0), tokens.device)
        memory = self._encode(source, source_pos) if source is not None else None
        # Right padding under a causal mask: every key a real token may see is real (padding comes
        # after it), so the causal mask alone keeps padding out of real tokens' outputs; padded rows
        # are never scored. One [1, 1, s, s] mask serves the whole batch, and biases stay [1, h, s, s].
        allowed = causal_mask(tokens.shape[1], tokens.device)  # [1, 1, s_t, s_t]
        return self._decode(tokens, pos, allowed, memory, None)

    def positions(self, tokens: Tensor, identity: Tensor | None = None, stack: str | None = None, structure: Tensor | None = None) -> Tensor:
        """The positions a forward pass gives ``tokens`` ``[b, s]`` (right-padded): ``[s]`` or
        ``[b, s]`` (:meth:`batch_positions`). ``identity``: rows that identify each example
        (default: ``tokens``; see :meth:`forward`); ``stack``: default the decoder's, or the
        encoder's in an encoder-only model; ``structure``: as :meth:`forward`'s.

        Raises:
            PositionLimitError: if the encoding cannot represent ``s`` positions.
            StructureError: if the encoding needs structural positions and none are given.
        """
        stack = stack or ("encoder" if self.decoder is None else "decoder")
        identity = tokens if identity is None else identity
        return self.batch_positions((tokens != PAD).sum(1), tokens.shape[1], identity, stack, structure)

    def batch_positions(self, lengths: Tensor, width: int, identity: Tensor, stack: str, structure: Tensor | None = None) -> Tensor:
        """The encoding's :meth:`PositionalEncoding.batch_positions`, given ``structure``
        ``[b, width]`` only when the encoding needs structural positions (the hook of an
        encoding that does not keeps its signature).

        Raises:
            StructureError: if the encoding needs structural positions and ``structure`` is None.
        """
        if not self.encoding.needs_structure:
            return self.encoding.batch_positions(lengths, width, identity, stack)
        if structure is None:
            raise StructureError(
                f"encoding '{type(self.encoding).__name__}' needs the structural positions of its tokens, but none were given: "
                "pass structure= (pebench.model.batching.structure_rows), from a task that has them"
            )
        return self.encoding.batch_positions(lengths, width, identity, stack, structure=structure)

    def encode(self, source: Tensor) -> Memory:
        """The encoder's output for incremental decoding. source: ``[b, s_s]``."""
        pos = self.positions(source, source, "encoder")
        self.encoding.prepare(source.shape[1], source.device)
        return self._encode(source, pos)

    def decode(self, tokens: Tensor, pos: Tensor, cache: KVCache, memory: Memory | None = None) -> Tensor:
        """Incremental decoding: logits ``[b, s_new, V]`` for ``tokens`` ``[b, s_new]`` at the
        positions ``pos`` ``[s_new]`` or ``[b, s_new]``, attending to the keys and values of
        earlier calls kept in ``cache`` (pass an empty dict first, then the same dict; reorder its
        tensors along the batch for beam search). The caller draws the positions of the whole
        decoded sequence once (``encoding.batch_positions`` of the longest each row can reach)
        and passes each call its slice, so that an encoding with random positions gives cached
        keys and later queries one consistent draw. Every decoder token is real: no padding mask;
        token i of the sequence attends to tokens 0..i.

        Raises:
            PositionLimitError: if a position is beyond the encoding's ``max_positions``.
        """
        bound = int(pos.max()) + 1
        self.encoding.check_length(bound)
        self.encoding.prepare(bound, tokens.device)
        first = Site("decoder", 0, "self")
        start = cache[first]["k"].shape[2] if first in cache else 0
        keys = torch.arange(start + tokens.shape[1], device=tokens.device)
        allowed = (keys[None, :] <= keys[start:, None])[None, None]  # [1, 1, s_new, start + s_new]
        return self._decode(tokens, pos, allowed, memory, cache)

    def _encode(self, source: Tensor, pos: Tensor) -> Memory:
        allowed = (source != PAD)[:, None, None, :]  # [b, 1, 1, s_s]
        x = self.embed(source, pos, "encoder")
        for block in self.encoder:
            x = block(x, pos, allowed, self.encoding)
        return Memory(self.encoder_norm(x), pos, allowed)

    def _decode(self, tokens: Tensor, pos: Tensor, allowed: Tensor, memory: Memory | None, cache: KVCache | None) -> Tensor:
        x = self.embed(tokens, pos, "decoder")
        for block in self.decoder:
            x = block(x, pos, allowed, self.encoding, memory, cache)
        return self.decoder_norm(x) @ self.embedding.weight.T  # [b, s, V]

    def embed(self, tokens: Tensor, pos: Tensor, stack: str) -> Tensor:
        """Scaled token embeddings with the encoding's input term: ``[b, s, d]``."""
        return self.encoding.embed(self.embedding(tokens) * math.sqrt(self.config.d_model), pos, stack)

    def parameter_counts(self) -> dict[str, int]:
        """Total trainable parameters and the encoding's own."""
        count = lambda module: sum(p.numel() for p in module.parameters() if p.requires_grad)  # noqa: E731
        return {"total": count(self), "encoding": count(self.encoding)}
