"""`python -m pebench` (and `torchrun -m pebench run ...`): the pebench command."""

import sys

from pebench.cli import main

sys.exit(main())
