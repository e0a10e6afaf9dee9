"""``--time-budget`` (tests/conftest.py): a run bounded by a device call's limit starts no test after its
budget, reports each one left as skipped with the reason, and still writes its summary and junit report
(``gpu_jobs/gpu_tests.sh``; a run stopped by ``timeout`` instead printed neither)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NODE = "tests/test_plugin_core.py::test_classic_triton_mm_id_is_upstreams"


def _pytest(tmp_path, budget: str) -> tuple[str, str]:
    report = tmp_path / f"report_{budget}.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", NODE,
                           "--time-budget", budget, f"--junitxml={report}"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, report.read_text()


def test_a_spent_budget_skips_the_tests_left_saying_why_and_the_reports_are_written(tmp_path):
    out, junit = _pytest(tmp_path, "0")
    assert "1 skipped" in out and "time budget of 0 s was spent" in out, out
    assert 'skipped="1"' in junit, junit


def test_tests_within_the_budget_run(tmp_path):
    out, junit = _pytest(tmp_path, "3600")
    assert "1 passed" in out, out
    assert 'skipped="0"' in junit and 'failures="0"' in junit, junit
