"""Fixtures that more than one test module sets up alike."""

from pathlib import Path

import pytest

from tests.plugin_packages import plugin_package


@pytest.fixture
def exploding_plugin(tmp_path) -> Path:
    """A real plugin that fails in the middle of training, in the folder ``tmp_path / "site"``."""
    return plugin_package(tmp_path / "site", "exploding", "Exploding", "raise RuntimeError('exploded at call 11')")
