"""What the records say: records as DataFrames (:mod:`.frames`), intervals and ranks
(:mod:`.statistics`), pairwise verdicts (:mod:`.verdicts`), leaderboards (:mod:`.leaderboards`),
published claims judged against them (:mod:`.validity`), a user's runs beside a baseline
(:mod:`.comparison`), rendered as tables (:mod:`.tables`), figures (:mod:`.plots`) and the files
of ``pebench report`` (:mod:`.report`, :mod:`.sections`).

Imports: records, the cards and core; never torch, the model or running (records are read, not
made, here).
"""
