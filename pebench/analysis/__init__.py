"""What the records say: records as DataFrames (:mod:`.frames`), intervals and ranks
(:mod:`.statistics`), pairwise verdicts (:mod:`.verdicts`), leaderboards (:mod:`.leaderboards`),
published claims as data (:mod:`.claims`) measured by their checks (:mod:`.checks`), the seeds
they need (:mod:`.seed_plan`), a user's runs beside a baseline (:mod:`.comparison`), rendered as
tables (:mod:`.tables`), the validity section (:mod:`.validity`), figures (:mod:`.plots`) and the
files of ``pebench report`` (:mod:`.report`, :mod:`.sections`).

Imports: records, the cards and ``--set`` settings of :mod:`pebench.config` (its torch-free
modules) and core; never torch, the model or running (records are read, not
made, here).
"""
