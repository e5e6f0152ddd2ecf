"""Throughput of every encoding, side by side in one process: the same as ``pebench bench``.

    python benchmarks/throughput.py            # the full table (about 30 minutes on 2 CPU cores)
    python benchmarks/throughput.py --quick    # a smoke test
See pebench/bench/throughput.py for what is measured and how.
"""

import sys

from pebench.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
