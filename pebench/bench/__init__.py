"""``pebench bench``: the throughput of every encoding side by side in one process, training and
evaluation, at a grid of lengths, beside peer implementations (:mod:`.throughput`).

Imports: running, config, the model, records and core; never analysis or the command line.
"""
