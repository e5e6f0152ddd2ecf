"""The model architectures a task card can choose (``model.architecture``).

A ``str``-valued Enum: each member equals, prints (``str``, f-strings) and serialises (JSON,
records, tables) as its value, the card's string, so that ``Architecture.DECODER == "decoder"``
and a record or table reads as it would with the plain string.
"""

from __future__ import annotations

import enum


class Architecture(str, enum.Enum):
    """``DECODER``: decoder-only, causal; ``ENCODER_DECODER``: a bidirectional encoder and a
    causal decoder with cross-attention (Vaswani et al. 2017); ``ENCODER``: encoder-only,
    bidirectional, predicting every output token at its placeholder in one pass (Delétang et
    al. 2023's format, :mod:`pebench.model.transformer`)."""

    DECODER = "decoder"
    ENCODER_DECODER = "encoder_decoder"
    ENCODER = "encoder"

    def __str__(self) -> str:  # the value, not "Architecture.DECODER"; format() follows __str__
        return self.value
