"""The transformer built from an encoding's hooks (:mod:`.transformer`: decoder-only,
encoder-decoder or encoder-only), how examples become its batches (:mod:`.batching`) and greedy
or beam decoding with cached keys and values (:mod:`.decoding`).

Imports: the contracts below it (:mod:`pebench.encodings`, :mod:`pebench.tasks`) and what they
import; never the cards, running or analysis.
"""
