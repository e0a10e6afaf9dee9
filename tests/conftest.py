"""Fixtures shared by several test files, and one probe shared by every process the tests start."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

# Inductor's own switch (torch/_inductor/config.py): trust the CPU's vector ISA without dry-compiling probes.
VEC_ISA_OK = "TORCHINDUCTOR_VEC_ISA_OK"
_RUN_STARTED = pytest.StashKey[float]()  # when pytest configured this run (``--time-budget``)


def pytest_addoption(parser):
    parser.addoption(
        "--time-budget", type=float, default=None, metavar="SECONDS",
        help="start no test after SECONDS of the run: each one left is reported as skipped, saying so, and the "
             "summary and reports are still written (gpu_jobs/gpu_tests.sh: a device call's limit)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """``--time-budget``: a test that would start after the budget is skipped with the reason."""
    budget = item.config.getoption("time_budget")
    if budget is not None and time.monotonic() - item.config.stash[_RUN_STARTED] > budget:
        pytest.skip(f"not started: the run's time budget of {budget:g} s was spent before this test's turn; "
                    "run it on its own (its node id as the test path)")


def pytest_configure(config):
    """Inductor's CPU path dry-compiles one probe program per vector ISA in every fresh Inductor cache, about
    10 s of g++ on 2 cores, and the end-to-end tests start a dozen processes with fresh caches (the tools
    under test make their own). Probe once here; when every ISA the CPU's flags name passes, tell the
    processes started from here so (VEC_ISA_OK=1): they pick the same ISA without the probes. Every kernel
    is still compiled for real."""
    config.stash[_RUN_STARTED] = time.monotonic()
    if "XDG_CACHE_HOME" not in os.environ:  # artifact trial verdicts (ah_plugin.use.artifact_trial): this session's own
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ah_tests_cache.")
    if VEC_ISA_OK in os.environ:
        return
    if (config.getoption("markexpr", "") or "").strip() == "gpu":
        return  # the GPU set compiles for CUDA: the CPU probes would only delay its first test
    from ah_plugin.inductor.compile_tools import vec_isa_trusted

    if vec_isa_trusted():  # compiles the probes (once a cache)
        os.environ[VEC_ISA_OK] = "1"


_SLOW_LEFT_OUT = []


def pytest_deselected(items):
    _SLOW_LEFT_OUT.extend(item for item in items if item.get_closest_marker("slow"))


def pytest_collection_finish(session):
    """With ``-q`` pytest prints only dots: say which set runs, and how to run the slow rest."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or session.config.option.collectonly or not _SLOW_LEFT_OUT:
        return
    reporter.write_line(
        f"ah-plugin: the fast set, {len(session.items)} tests; `python -m pytest -q -m slow` runs the other "
        f"{len(_SLOW_LEFT_OUT)} (real Inductor end to end in fresh processes, training on real data)")


@pytest.fixture
def tunable_env(monkeypatch, tmp_path):
    """A results cache with no AH_TUNABLE_* / TORCHINDUCTOR_* variables from outside, its results file
    under tmp_path, and an empty in-process store before and after the test."""
    from ah_plugin.tunable import settings as S
    from ah_plugin.tunable.store import store

    for name in list(os.environ):
        if name.startswith(("AH_TUNABLE_", "TORCHINDUCTOR_")) and name != VEC_ISA_OK:
            monkeypatch.delenv(name)
    monkeypatch.setenv(S.FILENAME, str(tmp_path / "res%d.csv"))
    store().clear()
    yield tmp_path
    store().clear()


@pytest.fixture
def tunable_api_state(monkeypatch, tmp_path):
    """No AH_TUNABLE_* variables from outside, the results and untuned files under tmp_path
    (``results%d.csv``, ``untuned%d.csv``), the values set through ``ah_plugin.tunable``'s functions restored
    and the in-process store emptied after the test."""
    from ah_plugin.tunable import settings as S
    from ah_plugin.tunable.store import store

    for name in list(os.environ):
        if name.startswith("AH_TUNABLE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv(S.FILENAME, str(tmp_path / "results%d.csv"))
    monkeypatch.setenv(S.UNTUNED_FILENAME, str(tmp_path / "untuned%d.csv"))
    saved = S._ApiValues(**S.api.__dict__)
    store().clear()
    yield
    S.api.__dict__.update(saved.__dict__)
    store().clear()


@pytest.fixture
def clean_use_env(monkeypatch):
    """No use-mode AH_PLUGIN_* variables from outside, and an empty artifact cache before and after."""
    from ah_plugin.use import artifact_loader

    for var in ("AH_PLUGIN_TOP_K", "AH_PLUGIN_TOP_K_MASS", "AH_PLUGIN_MIN_CHOICES", "AH_PLUGIN_KEEP_ATEN",
                "AH_PLUGIN_VERBOSE", "AH_PLUGIN_ARTIFACT_DIR"):
        monkeypatch.delenv(var, raising=False)
    artifact_loader.clear_cache()
    yield
    artifact_loader.clear_cache()
