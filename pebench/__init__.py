"""pebench: which positional encoding keeps working on sequences longer than it was trained on,
and at what cost?"""

from importlib.metadata import PackageNotFoundError, version

from .encodings.base import Geometry, PositionalEncoding, PositionLimitError, Site

try:
    __version__ = version("pebench")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
    __version__ = "0.0.0+unknown"

__all__ = ["Geometry", "PositionalEncoding", "PositionLimitError", "Site", "__version__", "load_results"]


def __getattr__(name: str):
    """``pebench.load_results`` (:func:`pebench.results.load_results`), imported on first use:
    ``import pebench`` stays free of pandas for plugins."""
    if name == "load_results":
        from .results import load_results

        return load_results
    raise AttributeError(f"module 'pebench' has no attribute {name!r}")
