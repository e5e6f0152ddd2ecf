"""FIRE: functional interpolation for relative positions.

Li et al. 2023, "Functional Interpolation for Relative Positions Improves Long Context
Transformers" (arXiv:2310.04418), eq. 3-5: the logit of query i and key j gets
    b(i, j) = f_theta( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(c x + 1),
with f_theta an MLP (1 -> ``hidden`` -> heads, ReLU), c > 0 and the threshold L learned; the
normalisation by the query position maps every offset into [0, 1], so lengths beyond training
are interpolated, not extrapolated. One FIRE module per self-attention layer. The paper defines
it for causal attention; bidirectional (encoder) attention here uses |i - j| with the same
normaliser (values up to psi(s)/psi(i) for keys after the query). Cross-attention gets no bias.
Shapes: h heads, s sequence.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pebench.encodings.base import Geometry, PositionalEncoding, Site, inverse_softplus, require_range


class FIREBias(nn.Module):
    """One layer's f_theta, c and L."""

    def __init__(self, n_heads: int, hidden: int, init_c: float, init_threshold: float):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, n_heads))
        self.raw_c = nn.Parameter(torch.tensor(inverse_softplus(init_c)))  # c = softplus(raw_c) > 0
        self.threshold = nn.Parameter(torch.tensor(float(init_threshold)))

    def forward(self, q_pos: Tensor, k_pos: Tensor, causal: bool) -> Tensor:
        c = nn.functional.softplus(self.raw_c)
        offset = (q_pos[..., :, None] - k_pos[..., None, :]).float()
        offset = offset.clamp(min=0) if causal else offset.abs()  # [(b,) s_q, s_k]
        normaliser = torch.log(c * torch.maximum(self.threshold.abs(), q_pos.float()) + 1)  # psi(max(L, i)): [(b,) s_q]
        ratio = torch.log(c * offset + 1) / normaliser.clamp(min=1e-6)[..., None]
        return self.mlp(ratio[..., None]).movedim(-1, -3)  # [(b,) h, s_q, s_k]


class FIRE(PositionalEncoding):
    """Learned function of the normalised log-distance, per head and layer.

    Args:
        geometry: the model served.
        hidden: width of f_theta's hidden layer (32 in the paper).
        init_c: initial c.
        init_threshold: initial L.
    """

    description = "FIRE: learned function of the progressively normalised log-distance"
    reference = "Li et al. 2023, arXiv:2310.04418"
    per_example_positions = True

    def __init__(self, geometry: Geometry, hidden: int = 32, init_c: float = 1.0, init_threshold: float = 1.0):
        super().__init__(geometry)
        require_range("FIRE", "hidden", hidden, at_least=1)
        require_range("FIRE", "init_c", init_c, above=0)
        require_range("FIRE", "init_threshold", init_threshold, above=0)
        self.index = geometry.self_attention_index
        self.layers = nn.ModuleList(FIREBias(geometry.n_heads, hidden, init_c, init_threshold) for _ in self.index)

    def bias(self, q_pos: Tensor, k_pos: Tensor, site: Site) -> Tensor | None:
        if site.kind == "cross":
            return None
        return self.layers[self.index[site]](q_pos, k_pos, causal=site.stack == "decoder")
