"""Generated blocks of a Markdown document (the README): the text between
``<!-- generated: PATH -->`` and ``<!-- end -->`` is PATH's content, PATH relative to the
document's folder. ``pebench report --readme README.md`` refreshes them after writing the tables,
so that the README shows the tables as generated, never hand-edited ones (``tests/test_results.py``
checks that the committed README's blocks are the committed tables)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

BLOCK = re.compile(r"<!-- generated: (\S+) -->\n(.*?)<!-- end -->", flags=re.S)


def generated_blocks(text: str) -> dict[str, str]:
    """The blocks of a document's text: {path as written: the text between the markers}."""
    return dict(BLOCK.findall(text))


def refresh_blocks(document: Path) -> list[str]:
    """Rewrite each generated block of ``document`` with its file's current content.

    Returns the paths of the blocks, in order. Raises ``FileNotFoundError`` (naming the block and
    the file) when a block's file does not exist, and ``ValueError`` when the document has no block;
    the document is then unchanged: it is written once, atomically, after every file was read.
    """
    text = document.read_text()
    paths = BLOCK.findall(text)
    if not paths:
        raise ValueError(f"{document} has no '<!-- generated: PATH -->' ... '<!-- end -->' block")
    contents = {}
    for path, _ in paths:
        source = document.parent / path
        if not source.is_file():
            raise FileNotFoundError(f"{document}: the block 'generated: {path}' names {source}, which does not exist")
        contents[path] = source.read_text()
    refreshed = BLOCK.sub(lambda match: f"<!-- generated: {match[1]} -->\n{contents[match[1]]}<!-- end -->", text)
    with tempfile.NamedTemporaryFile("w", dir=document.parent, delete=False, suffix=".tmp") as handle:
        handle.write(refreshed)
    os.chmod(handle.name, document.stat().st_mode)
    os.replace(handle.name, document)
    return [path for path, _ in paths]
