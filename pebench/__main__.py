"""`python -m pebench` (and `torchrun -m pebench run ...`): the pebench command."""

import sys

from .cli import main

sys.exit(main())
