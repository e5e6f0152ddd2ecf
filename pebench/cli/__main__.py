"""`python -m pebench.cli`: the pebench command, as `python -m pebench`."""

import sys

from pebench.cli import main

sys.exit(main())
