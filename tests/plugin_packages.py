"""Throwaway plugin packages written into a folder, for a subprocess to find on its PYTHONPATH:
real entry points, a real module, a hook that fails on cue."""

from pathlib import Path


def plugin_package(folder: Path, name: str, class_name: str, failure: str) -> Path:
    """A real plugin package in ``folder``: the encoding ``name`` whose ``bias`` hook runs
    ``failure`` (a line of Python) from its 11th call on, in the middle of training."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_plugin.py").write_text(
        "import os, signal\n"
        "from pebench import PositionalEncoding\n"
        f"class {class_name}(PositionalEncoding):\n"
        "    calls = 0\n"
        "    def bias(self, q_pos, k_pos, site):\n"
        f"        {class_name}.calls += 1\n"
        f"        if {class_name}.calls > 10:\n"
        f"            {failure}\n"
        "        return None\n"
    )
    info = folder / f"{name}_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pebench.encodings]\n{name} = {name}_plugin:{class_name}\n")
    return folder
