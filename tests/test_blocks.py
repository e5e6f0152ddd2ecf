"""The README's generated blocks: refreshed from their files, the prose around them kept, and a
block naming a missing file an error that leaves the document as it was."""

import pytest

from pebench.blocks import generated_blocks, refresh_blocks

DOCUMENT = """# Title

Prose before.

<!-- generated: tables/a.md -->
| stale | table |
<!-- end -->

Prose between.

<!-- generated: b.md -->
old
<!-- end -->
Prose after.
"""


def test_each_block_becomes_its_file_and_the_prose_stays(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "a.md").write_text("| encoding | OOD |\n|---|---|\n| nope | 0.5 |\n")
    (tmp_path / "b.md").write_text("new\n")
    document = tmp_path / "README.md"
    document.write_text(DOCUMENT)
    document.chmod(0o644)
    assert refresh_blocks(document) == ["tables/a.md", "b.md"]
    assert document.read_text() == DOCUMENT.replace("| stale | table |\n", "| encoding | OOD |\n|---|---|\n| nope | 0.5 |\n").replace("old\n", "new\n")
    assert generated_blocks(document.read_text()) == {"tables/a.md": "| encoding | OOD |\n|---|---|\n| nope | 0.5 |\n", "b.md": "new\n"}
    assert document.stat().st_mode & 0o777 == 0o644
    assert refresh_blocks(document) == ["tables/a.md", "b.md"]  # a second refresh changes nothing
    assert generated_blocks(document.read_text())["b.md"] == "new\n"


def test_a_block_naming_a_missing_file_is_an_error_and_the_document_is_unchanged(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "a.md").write_text("fresh\n")
    document = tmp_path / "README.md"
    document.write_text(DOCUMENT)
    with pytest.raises(FileNotFoundError, match="generated: b.md"):
        refresh_blocks(document)
    assert document.read_text() == DOCUMENT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "tables"]  # no temporary file left


def test_a_document_without_blocks_is_an_error(tmp_path):
    document = tmp_path / "README.md"
    document.write_text("# Title\n\nNo tables here.\n")
    with pytest.raises(ValueError, match="no '<!-- generated: PATH -->'"):
        refresh_blocks(document)
    assert document.read_text() == "# Title\n\nNo tables here.\n"
