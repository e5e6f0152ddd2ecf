"""Positional-encoding plugins: the contract (:mod:`.base`) and the built-in families.

Built-ins are registered through the ``pebench.encodings`` entry-point group like any
third-party plugin; see :mod:`pebench.core.registry`.
"""

from pebench.encodings.base import Geometry, PositionalEncoding, PositionLimitError, Site, StructureError

__all__ = ["Geometry", "PositionalEncoding", "PositionLimitError", "Site", "StructureError"]
