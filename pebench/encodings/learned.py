"""Learned absolute positional embeddings.

Gehring et al. 2017 (ConvS2S) and Devlin et al. 2019 (BERT): a trainable table E[pos] of shape
[max_positions, d], one per stack, added to the token embeddings. Positions beyond the table
have no representation: asking for one raises :class:`PositionLimitError`, never an index error.
Shapes: b batch, s sequence, d model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pebench.encodings.base import Geometry, PositionalEncoding, require_range


class Learned(PositionalEncoding):
    """A trainable position table per stack.

    Args:
        geometry: the model served.
        max_positions: table rows; default ``geometry.max_length`` (the task's longest
            evaluation sequence), so the rows past the training lengths exist but stay untrained.
        init_std: standard deviation of the normal initialisation.
    Raises:
        PositionLimitError: from the hooks, for a sequence longer than ``max_positions``.
    """

    description = "Trainable absolute position table added to the token embeddings"
    reference = "Gehring et al. 2017, arXiv:1705.03122; Devlin et al. 2019, arXiv:1810.04805"
    per_example_positions = True

    def __init__(self, geometry: Geometry, max_positions: int | None = None, init_std: float = 0.5):
        super().__init__(geometry)
        if max_positions is not None:
            require_range("the learned encoding", "max_positions", max_positions, at_least=1)
        require_range("the learned encoding", "init_std", init_std, at_least=0)
        self.max_positions = max_positions or geometry.max_length
        self.tables = nn.ParameterDict({stack: nn.Parameter(torch.randn(self.max_positions, geometry.d_model) * init_std) for stack in geometry.stacks})

    def embed(self, x: Tensor, pos: Tensor, stack: str) -> Tensor:
        self.check_length(int(pos.max()) + 1)
        return x + self.tables[stack][pos].to(x.dtype)  # [b, s, d] (pos [s] or [b, s])
