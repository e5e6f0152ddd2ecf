"""What a run leaves behind: the typed run record (:mod:`.types`), its JSON schema
(``schema.json``), the store that validates, writes atomically and reads back (:mod:`.store`),
where each file lives under a results folder (:mod:`.paths`), and the versions stamped on it
(:mod:`.versions`).

Imports: nothing of pebench's layers but :mod:`pebench.core` (and the package's ``__version__``);
never torch, so the analysis can read records without it.
"""
