"""The names every layer shares, below all of them: plugin discovery through entry points
(:mod:`.registry`), the registry of metrics and their per-example and corpus scores
(:mod:`.metrics`), and the checks of a setting's value against its type and range (:mod:`.values`).

Imports: the standard library, sacrebleu and nothing of pebench (the bottom layer).
"""
