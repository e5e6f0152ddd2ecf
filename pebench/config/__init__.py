"""What a run is asked to do: the cards (:mod:`.cards`: encodings, tasks and suites as TOML and
their ``--set`` overrides), the kind of task a card is (:mod:`.kinds`) and the validated protocol
a task card resolves to (:mod:`.protocol`: length split, buckets, metrics, model, budget, target).

Imports: the model, the task contract and core; never running, analysis or the command line.
"""
