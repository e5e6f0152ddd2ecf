"""The example plugin against pebench's conformance kit: one test per property and architecture."""

import pytest

import pebench.testing
from pebench_plugin_example import LearnedSlopes


@pytest.mark.parametrize("check", pebench.testing.checks(LearnedSlopes), ids=str)
def test_conformance(check):
    check()
