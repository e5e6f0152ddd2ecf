"""The README's generated sections: refreshed from their files, the prose around them kept, and a
section naming a missing file an error that leaves the document as it was."""

import pytest

from pebench.analysis.sections import generated_sections, refresh_sections

DOCUMENT = """# Title

Prose before, naming the markers: `<!-- generated: PATH -->`.

<!-- generated: tables/a.md -->
| stale | table |
<!-- end -->

Prose between.

<!-- generated: b.md -->
old
<!-- end -->
Prose after.
"""


def folder(tmp_path, a="fresh\n", b="new\n", document=DOCUMENT):
    """README.md (``document``) beside tables/a.md and b.md (with ``a`` and ``b``; None: no file)."""
    (tmp_path / "tables").mkdir()
    for path, text in (("tables/a.md", a), ("b.md", b)):
        if text is not None:
            (tmp_path / path).write_text(text)
    (tmp_path / "README.md").write_text(document)
    return tmp_path / "README.md"


def test_each_block_becomes_its_file_and_the_prose_stays(tmp_path):
    table = "| encoding | OOD |\n|---|---|\n| nope | 0.5 |\n"
    document = folder(tmp_path, a=table)
    document.chmod(0o644)
    assert refresh_sections(document) == ["tables/a.md", "b.md"]
    assert document.read_text() == DOCUMENT.replace("| stale | table |\n", table).replace("old\n", "new\n")
    assert generated_sections(document.read_text()) == {"tables/a.md": table, "b.md": "new\n"}
    assert document.stat().st_mode & 0o777 == 0o644
    refreshed = document.read_text()
    assert refresh_sections(document) == ["tables/a.md", "b.md"]
    assert document.read_text() == refreshed  # a second refresh changes nothing


def test_a_block_naming_a_missing_file_is_an_error_and_the_document_is_unchanged(tmp_path):
    document = folder(tmp_path, b=None)
    with pytest.raises(FileNotFoundError, match="generated: b.md"):
        refresh_sections(document)
    assert document.read_text() == DOCUMENT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "tables"]  # no temporary file left


def test_a_document_without_blocks_is_an_error(tmp_path):
    document = folder(tmp_path, document="# Title\n\nNo tables here.\n")
    with pytest.raises(ValueError, match="no '<!-- generated: PATH -->'"):
        refresh_sections(document)
    assert document.read_text() == "# Title\n\nNo tables here.\n"


def test_a_block_without_its_end_marker_is_an_error_not_a_loss_of_the_prose_after_it(tmp_path):
    # Read naively, the first section would run on to the second section's end, eating "Prose between."
    broken = DOCUMENT.replace("| stale | table |\n<!-- end -->", "| stale | table |\n")
    document = folder(tmp_path, document=broken)
    with pytest.raises(ValueError, match="2 '<!-- generated: PATH -->' markers but 1 sections"):
        refresh_sections(document)
    assert document.read_text() == broken


def test_a_file_without_a_final_newline_keeps_the_end_marker_on_its_own_line(tmp_path):
    document = folder(tmp_path, a="| x |")
    refresh_sections(document)
    assert "<!-- generated: tables/a.md -->\n| x |\n<!-- end -->\n" in document.read_text()


def test_a_linked_document_is_refreshed_in_its_target(tmp_path):
    document = folder(tmp_path)
    (tmp_path / "link.md").symlink_to(document)
    refresh_sections(tmp_path / "link.md")
    assert (tmp_path / "link.md").is_symlink() and "fresh\n<!-- end -->" in document.read_text()
