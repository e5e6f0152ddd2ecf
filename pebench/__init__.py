"""pebench: which positional encoding keeps working on sequences longer than it was trained on,
and at what cost?"""

from importlib.metadata import PackageNotFoundError, version

from .encodings.base import Geometry, PositionalEncoding, PositionLimitError, Site

try:
    __version__ = version("pebench")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled checkout
    __version__ = "0.0.0+unknown"

__all__ = ["Geometry", "PositionalEncoding", "PositionLimitError", "Site", "__version__"]
