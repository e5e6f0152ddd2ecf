"""The committed results: leaderboards regenerate identically from the committed records, and
the README shows the generated tables, not hand-edited ones."""

import re
from pathlib import Path

from pebench import bench
from pebench.records import load_records, to_frame
from pebench.report import write_reports

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
TABLES = (".md", ".csv", ".tex", ".html")


def test_committed_leaderboards_regenerate_identically_from_the_committed_records(tmp_path):
    write_reports(to_frame(load_records(RESULTS)), tmp_path, bench.load(RESULTS))
    committed = {p.name: p for p in (RESULTS / "leaderboards").iterdir()}
    regenerated = {p.name: p for p in tmp_path.iterdir()}
    assert sorted(committed) == sorted(regenerated)
    for name, path in committed.items():
        if path.suffix in TABLES:
            assert regenerated[name].read_text() == path.read_text(), f"{name} differs from what pebench report makes now"


def test_the_readme_shows_the_generated_tables():
    readme = (ROOT / "README.md").read_text()
    blocks = dict(re.findall(r"<!-- generated: (\S+) -->\n(.*?)<!-- end -->", readme, flags=re.S))
    assert {"results/leaderboards/overall.md", "results/leaderboards/wmt_long.md"} <= set(blocks)
    for path, text in blocks.items():
        assert text == (ROOT / path).read_text(), f"README block differs from {path}"
