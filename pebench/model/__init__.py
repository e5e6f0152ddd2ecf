"""The transformer built from an encoding's hooks (:mod:`.transformer`: decoder-only,
encoder-decoder or encoder-only), how examples become its batches (:mod:`.batching`) and greedy
or beam decoding with cached keys and values (:mod:`.decoding`).

Imports: the contracts (:mod:`pebench.encodings`, :mod:`pebench.tasks`), :mod:`pebench.records`
and :mod:`pebench.core`; never the cards, running or analysis.
"""
