"""Fixtures shared by several test files."""

from __future__ import annotations

import os

import pytest

#: whole-suite figures the line below quotes (2-core CPU, CPU build of torch)
SUITE_MINUTES, QUICK_MINUTES = 10, 3.5


def pytest_collection_finish(session):
    """With ``-q`` pytest prints only dots: say first how long the whole suite takes and how to run the
    quick part. Only for a large run (not a single file)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    slow = sum(1 for item in session.items if item.get_closest_marker("slow"))
    if reporter is None or session.config.option.collectonly or len(session.items) < 100 or not slow:
        return
    reporter.write_line(
        f"ah-plugin: {len(session.items)} tests, {slow} of them slow (real Inductor compiles in fresh processes): "
        f"about {SUITE_MINUTES} minutes on a 2-core CPU; -m \"not slow\" runs the others in about {QUICK_MINUTES}")


@pytest.fixture
def tunable_env(monkeypatch, tmp_path):
    """A results cache with no AH_TUNABLE_* / TORCHINDUCTOR_* variables from outside, its results file
    under tmp_path, and an empty in-process store before and after the test."""
    from ah_plugin.tunable import settings as S
    from ah_plugin.tunable.store import store

    for name in list(os.environ):
        if name.startswith(("AH_TUNABLE_", "TORCHINDUCTOR_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv(S.FILENAME, str(tmp_path / "res%d.csv"))
    store().clear()
    yield tmp_path
    store().clear()


@pytest.fixture
def clean_use_env(monkeypatch):
    """No use-mode AH_PLUGIN_* variables from outside, and an empty artifact cache before and after."""
    from ah_plugin import artifact_loader

    for var in ("AH_PLUGIN_TOP_K", "AH_PLUGIN_TOP_K_MASS", "AH_PLUGIN_MIN_CHOICES", "AH_PLUGIN_KEEP_ATEN",
                "AH_PLUGIN_VERBOSE", "AH_PLUGIN_ARTIFACT_DIR"):
        monkeypatch.delenv(var, raising=False)
    artifact_loader.clear_cache()
    yield
    artifact_loader.clear_cache()
