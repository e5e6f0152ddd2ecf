"""Doing a run: choosing the device (:mod:`.devices`), training (:mod:`.train`), scoring per
length (:mod:`.evaluation`, :mod:`.perplexity`), keeping weights (:mod:`.checkpoints`), one run
from card names to its record (:mod:`.execution`), across processes with torchrun
(:mod:`.distributed`), a grid of runs (:mod:`.sweep`) and where its cells execute
(:mod:`.engines`: here, Ray or Slurm).

Imports: config, the model, the contracts, records and core; never analysis, bench or the
command line.
"""
