"""How a ``pebench`` command refuses bad input: one line on stderr, then exit status 2."""

from __future__ import annotations

import sys


def fail(error: Exception) -> int:
    """Print ``error`` as ``pebench: error: <message>`` on stderr; return the exit status 2."""
    print(f"pebench: error: {error}", file=sys.stderr)
    return 2
