"""pebench: which positional encoding keeps working on sequences longer than it was trained on,
and at what cost?"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pebench")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
    __version__ = "0.0.0+unknown"

_LAZY = {name: "pebench.encodings.base" for name in ("Geometry", "PositionalEncoding", "PositionLimitError", "Site", "StructureError", "require_range")}
_LAZY["load_results"] = "pebench.analysis.frames"
__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str):
    """The public names, imported on first use (PEP 562): ``import pebench`` stays free of torch
    for the report and of pandas for plugins; ``pebench.PositionalEncoding`` is
    :class:`pebench.encodings.base.PositionalEncoding`, ``pebench.load_results``
    :func:`pebench.analysis.frames.load_results`."""
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pebench' has no attribute {name!r}")
