"""The committed results: leaderboards regenerate identically from the committed records (read
from HEAD, so that a user's own runs do not count), and the README shows the generated tables,
not hand-edited ones."""

import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from pebench.bench import throughput as bench
from pebench.analysis.sections import generated_sections
from pebench.records.store import load_records
from pebench.analysis.report import write_reports

ROOT = Path(__file__).resolve().parents[2]
TABLES = (".md", ".csv", ".tex", ".html")


def committed_results(tmp_path: Path) -> Path:
    """results/ as committed at HEAD: a user's own runs in the working tree (the README's first
    command writes results/runs/copy/flow/seed0.json) are not the committed records."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD", "results"], capture_output=True)
    if archive.returncode:
        pytest.skip(f"not a git checkout with committed results: {archive.stderr.decode().strip()}")
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(tmp_path, filter="data")
    return tmp_path / "results"


def test_committed_leaderboards_regenerate_identically_from_the_committed_records(tmp_path):
    results = committed_results(tmp_path / "committed")
    records, skipped = load_records(results)
    assert not skipped
    write_reports(records, tmp_path / "regenerated", bench.load(results))
    committed = {p.name: p for p in (results / "leaderboards").iterdir()}
    regenerated = {p.name: p for p in (tmp_path / "regenerated").iterdir()}
    assert sorted(committed) == sorted(regenerated)
    for name, path in committed.items():
        if path.suffix in TABLES:
            assert regenerated[name].read_text() == path.read_text(), f"{name} differs from what pebench report makes now"


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_documents_show_the_generated_tables(tmp_path):
    # The committed tables, or those regenerated in this checkout: a user's own runs and
    # `pebench report` (the README's first commands) rewrite results/ but not the documents.
    committed = committed_results(tmp_path).parent
    shown = set()
    for document in DOCUMENTS:
        for path, text in generated_sections(document.read_text()).items():
            file = (document.parent / path).resolve().relative_to(ROOT)
            shown.add(str(file))
            assert text in ((committed / file).read_text(), (ROOT / file).read_text()), f"{document.name}: its section differs from {file}"
    assert {"results/leaderboards/overall.md", "results/leaderboards/validity.md", "results/leaderboards/runtime.md", "results/leaderboards/chomsky.md",
            "results/throughput/summary.md"} <= shown
    assert "results/leaderboards/overall.md" in generated_sections((ROOT / "README.md").read_text())  # the headline, on the first page


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(document: Path) -> set[str]:
    """GitHub's anchors of a Markdown document's headings."""
    headings = [line.lstrip("#").strip() for line in document.read_text().splitlines() if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_link_of_the_documents_resolves():
    for document in DOCUMENTS:
        for target in LINK.findall(document.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            assert linked.exists(), f"{document.name}: the link {target} names no file"
            if anchor:
                assert anchor in _anchors(linked), f"{document.name}: the link {target} names no heading of {linked.name}"
