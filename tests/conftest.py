"""Fixtures shared by several test files."""

from __future__ import annotations

import os

import pytest


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
