"""Generated sections of a Markdown document (the README): the text between
``<!-- generated: PATH -->`` and ``<!-- end -->`` is PATH's content, PATH relative to the
document's folder. ``pebench report --readme README.md`` refreshes them after writing the tables,
so that the README shows the tables as generated, never hand-edited ones (``tests/analysis/test_committed_results.py``
checks that the committed README's sections are the committed tables)."""

from __future__ import annotations

import re
from pathlib import Path

from pebench.records.store import write_atomically

OPENING = "<!-- generated: "
_MARKER = rf"{OPENING}(\S+) -->\n"  # a line of its own; a mention in prose is not one
MARKER = re.compile(_MARKER)
SECTION = re.compile(rf"{_MARKER}((?:(?!{OPENING}\S+ -->\n).)*?)<!-- end -->", flags=re.S)


def generated_sections(text: str) -> dict[str, str]:
    """The sections of a document's text: {path as written: the text between the markers}.

    Raises ``ValueError`` when an opening marker has no ``<!-- end -->`` before the next section."""
    sections, markers = SECTION.findall(text), len(MARKER.findall(text))
    if len(sections) != markers:
        raise ValueError(f"{markers} '{OPENING}PATH -->' markers but {len(sections)} sections: one has no '<!-- end -->' before the next")
    return dict(sections)


def refresh_sections(document: Path) -> list[str]:
    """Rewrite each generated section of ``document`` with its file's current content (a newline
    added when the file does not end with one, so that the end marker keeps its own line).

    Returns the paths of the sections, in order. Raises ``FileNotFoundError`` (naming the section and
    the file) when a section's file is not a file, and ``ValueError`` when the document has no
    section or a section without its end marker; the document is then unchanged: it is written once,
    atomically (through a symbolic link, to its target), after every file was read."""
    document = Path(document).resolve()
    text = document.read_text(encoding="utf-8")
    paths = list(generated_sections(text))
    if not paths:
        raise ValueError(f"{document} has no '{OPENING}PATH -->' ... '<!-- end -->' section")
    contents = {}
    for path in paths:
        source = document.parent / path
        if not source.is_file():
            raise FileNotFoundError(f"{document}: the section '{OPENING}{path} -->' names {source}, which is not a file")
        content = source.read_text(encoding="utf-8")
        contents[path] = content if content.endswith("\n") else content + "\n"
    write_atomically(document, SECTION.sub(lambda match: f"{OPENING}{match[1]} -->\n{contents[match[1]]}<!-- end -->", text))
    return paths
