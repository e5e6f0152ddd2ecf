"""The versions pebench stamps on what it writes: the benchmark protocol (how a run is trained
and scored: :mod:`pebench.config.protocol`) and the run-record schema (:mod:`pebench.records.store`)."""

PROTOCOL_VERSION = 2  # 1: a fixed budget, teacher-forced scores; 2: trained to the ID target, greedy scores per length
SCHEMA_VERSION = 2
RANKED_PROTOCOL = PROTOCOL_VERSION  # the protocol whose runs the report ranks and compares; runs of earlier ones are shown apart
