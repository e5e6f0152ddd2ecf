"""Position embeddings indexed by the task's structural positions: Abacus and position coupling.

Both add a learned embedding E[id] to each token embedding, where the id comes from the token's
*structural position* s (:mod:`pebench.tasks.base`; for addition, a digit's significance in its
number: 1 for the units, 2 for the tens, ...; 0 for a token that is not a digit), shifted by a
random offset while training so that the embeddings of large ids, which short training examples
never reach, are trained too. Neither adds anything else: attention is NoPE's, as in both
papers' main models.

- Abacus (McLeish et al. 2024, "Transformers Can Do Arithmetic with the Right Embeddings",
  arXiv:2405.17399, sec. 3; github.com/mcleish7/arithmetic, ``abacus.py``):
  id = s + k for a digit (s >= 1), 0 otherwise; k uniform in {0, ..., max_k} while training,
  k = 0 at evaluation. The authors' main models use it with no other position information
  (``pos_embedding=abacus``, no rotary or FIRE term).
- Position coupling (Cho et al. 2024, "Position Coupling: Improving Length Generalization of
  Arithmetic Transformers Using Task Structure", arXiv:2405.20671, sec. 3;
  github.com/HanseulJo/position-coupling, ``AdditionDatasetWithCoupledPositions``): the id of every
  token is start + s, so the digits of equal significance in both operands and in the answer share
  one id and the operator and '=' share the start; start uniform in {1, ..., max_position - m}
  while training (m: the example's largest structural position), start = 1 at evaluation. The
  authors use the ids as the position ids of a learned absolute embedding with NoPE attention.

Where pebench differs from the authors' code, for both: the random offset is drawn per example
(Abacus draws one k per batch; Cho et al. one start per example, as here), so an example's
training does not depend on its batch; BOS and padding have s = 0 like the operator. Position
coupling runs here on the task's format (both operands and the answer least-significant digit
first, no zero padding: McLeish et al.'s), not on Cho et al.'s (operands most-significant first,
zero-padded to equal length, answer reversed and padded): the coupling of significance to id is
theirs.

An id beyond the table raises :class:`PositionLimitError` naming the id and the table.
Shapes: b batch, s sequence, d model width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pebench.encodings.base import Geometry, PositionalEncoding, PositionLimitError, require_range


class StructuralEmbedding(PositionalEncoding):
    """A learned embedding table indexed by ids made from structural positions; subclasses say
    how (:meth:`ids`).

    Args:
        geometry: the model served.
        max_position: the largest id with an embedding (the table has max_position + 1 rows).
        init_std: standard deviation of the table's normal initialisation.
    Raises:
        ValueError: for a max_position below 1 or a negative init_std.
    """

    per_example_positions = True
    needs_structure = True

    def __init__(self, geometry: Geometry, max_position: int, init_std: float):
        super().__init__(geometry)
        name = type(self).__name__
        require_range(name, "max_position", max_position, at_least=1)
        require_range(name, "init_std", init_std, at_least=0)
        self.max_position = max_position
        self.table = nn.Embedding(max_position + 1, geometry.d_model)
        nn.init.normal_(self.table.weight, std=init_std)

    def batch_positions(self, lengths: Tensor, width: int, identity: Tensor, stack: str, structure: Tensor | None = None) -> Tensor:
        """The ids of a batch: ``[b, width]`` long, from ``structure`` ``[b, width]``.

        Raises:
            PositionLimitError: if an id is beyond the table.
        """
        if structure.shape[1] < width:
            raise ValueError(f"structural positions for {structure.shape[1]} tokens were given for a batch of {width}: give one per token")
        ids = self.ids(structure[:, :width])
        self.check_ids(ids, structure[:, :width])
        return ids

    def check_ids(self, ids: Tensor, structure: Tensor | None = None) -> None:
        """Raise :class:`PositionLimitError` if an id of ``ids`` is beyond the table, naming the
        structural position it came from when ``structure`` is given."""
        largest = int(ids.max())
        if largest > self.max_position:
            asked = "asked for" if structure is None else f"a token at structural position {int(structure.max())} needs"
            raise PositionLimitError(
                f"encoding '{type(self).__name__}' has embeddings for ids up to {self.max_position}, but {asked} id {largest}; "
                f"raise its max_position (--set encoding.max_position={largest})"
            )

    def ids(self, structure: Tensor) -> Tensor:
        """Ids ``[b, s]`` long from structural positions ``[b, s]`` long."""
        raise NotImplementedError

    def offsets(self, high: Tensor) -> Tensor:
        """Per example, an offset drawn uniformly from {0, ..., high} (``high`` ``[b]`` long, at
        least 0) while training, from torch's generator; 0 at evaluation. Returns ``[b, 1]``."""
        if not self.training:
            return torch.zeros_like(high)[:, None]
        return (torch.rand(high.shape, device=high.device) * (high + 1)).long().clamp(max=high)[:, None]

    def embed(self, x: Tensor, pos: Tensor, stack: str) -> Tensor:
        """x plus the table's row of each id: ``[b, s, d]``, pos ``[b, s]`` ids.

        Raises:
            PositionLimitError: for an id beyond the table.
        """
        self.check_ids(pos)
        return x + self.table(pos).to(x.dtype)  # [b, s, d]

    def extra_repr(self) -> str:
        return f"max_position={self.max_position}"


class Abacus(StructuralEmbedding):
    """Abacus embeddings: id = s + k for a digit, 0 for any other token (McLeish et al. 2024).

    Args:
        geometry: the model served.
        max_k: the largest training offset k (the authors' default: 99 to 100 for 20-digit
            training).
        max_position: the largest id with an embedding; default max_k + the task's longest
            sequence, so every digit of the longest evaluation example has an id (the ids past
            the training digits plus max_k stay untrained).
        init_std: the table's initial standard deviation.
    Raises:
        ValueError: for a negative max_k, or as :class:`StructuralEmbedding`.
    """

    description = "Abacus: a learned embedding of each digit's significance, randomly offset in training; NoPE otherwise"
    reference = "McLeish et al. 2024, arXiv:2405.17399"

    def __init__(self, geometry: Geometry, max_k: int = 50, max_position: int | None = None, init_std: float = 0.5):
        require_range("Abacus", "max_k", max_k, at_least=0)
        super().__init__(geometry, max_k + geometry.max_length if max_position is None else max_position, init_std)
        self.max_k = max_k

    def ids(self, structure: Tensor) -> Tensor:
        k = self.offsets(torch.full_like(structure[:, 0], self.max_k))
        return torch.where(structure > 0, structure + k, 0)


class PositionCoupling(StructuralEmbedding):
    """Position coupling: id = start + s for every token (Cho et al. 2024).

    Args:
        geometry: the model served.
        max_position: the largest id with an embedding, and so the range of the training start
            (the authors: 102 to 150 for tests up to 100 digits); default twice the task's
            longest sequence.
        init_std: the table's initial standard deviation.
    Raises:
        PositionLimitError: from the hooks, where an example's structural positions leave no
            start within max_position.
    """

    description = "Position coupling: digits of equal significance share a learned position id, random start in training; NoPE otherwise"
    reference = "Cho et al. 2024, arXiv:2405.20671"

    def __init__(self, geometry: Geometry, max_position: int | None = None, init_std: float = 0.5):
        super().__init__(geometry, 2 * geometry.max_length if max_position is None else max_position, init_std)

    def ids(self, structure: Tensor) -> Tensor:
        room = (self.max_position - 1 - structure.max(1).values).clamp(min=0)  # start - 1 in {0, ..., room}
        return structure + 1 + self.offsets(room)
