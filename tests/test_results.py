"""The committed results: leaderboards regenerate identically from the committed records (read
from HEAD, so that a user's own runs do not count), and the README shows the generated tables,
not hand-edited ones."""

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from pebench import bench
from pebench.sections import generated_sections
from pebench.records import load_records
from pebench.report import write_reports

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_readme_shows_the_generated_tables(tmp_path):
    # The committed tables, or those regenerated in this checkout: a user's own runs and
    # `pebench report` (the README's first commands) rewrite results/ but not the README.
    readme = (ROOT / "README.md").read_text()
    blocks = generated_sections(readme)
    assert {"results/leaderboards/overall.md", "results/leaderboards/validity.md", "results/leaderboards/runtime.md", "results/leaderboards/chomsky.md",
            "results/throughput/summary.md"} <= set(blocks)
    committed = committed_results(tmp_path).parent
    for path, text in blocks.items():
        assert text in ((committed / path).read_text(), (ROOT / path).read_text()), f"README block differs from {path}"
