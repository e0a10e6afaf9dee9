"""torchgen_ah.evaluation.studies.quality_ceiling on the committed replay logs: the ceiling per GEMM, the shapes
without a logged template, and bad input named by file and line."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pandas")

from torchgen_ah.evaluation.studies import quality_ceiling  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = os.path.join(REPO, "datasets", "h200_replay", "h200_replay_mm.txt.gz")
SHAPE = "mm 13x1000x4099 bfloat16 NN"  # in the log; its best template beats cuBLAS


@pytest.fixture(scope="module")
def templates():
    return quality_ceiling.best_templates([LOG])


def _lines(shape, off_us, default_us):
    return [{"mode": "off", "shape": shape, "rep": 0, "replay_ms": off_us / 1000},
            {"mode": "default", "shape": shape, "rep": 0, "replay_ms": default_us / 1000}]


def test_the_ceiling_is_the_fastest_of_off_default_and_the_best_logged_template(templates):
    best_ms = templates["13x1000x4099 bfloat16 NN"]
    assert 0.005 < best_ms < 0.0118  # a template under cuBLAS's 11.8 us
    rows, missing = quality_ceiling.ceiling_rows(_lines(SHAPE, 11.8, 12.0), templates)
    assert missing == [] and rows[0]["ceiling"] == pytest.approx(best_ms * 1000 / 11.8)
    # where default already runs faster than any logged template, nothing is left to gain
    rows, _ = quality_ceiling.ceiling_rows(_lines(SHAPE, 11.8, best_ms * 1000 * 0.9), templates)
    assert rows[0]["ceiling"] == 1.0
    # a GEMM the log does not hold is counted as left out, not scored
    rows, missing = quality_ceiling.ceiling_rows(_lines("mm 7x7x7 bfloat16 NN", 1.0, 1.0), templates)
    assert rows == [] and missing == ["mm 7x7x7 bfloat16 NN"]


def test_the_command_line_reports_the_summary_and_names_bad_lines(tmp_path):
    kernels = tmp_path / "kernels.jsonl"
    kernels.write_text("".join(json.dumps(line) + "\n" for line in _lines(SHAPE, 11.8, 12.0)), encoding="utf-8")
    out = tmp_path / "ceiling.json"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.quality_ceiling", str(kernels),
                           "--log", LOG, "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "1 GEMMs with off, default and a logged template" in proc.stdout
    assert json.loads(out.read_text())["summary"]["gemms_at_bar"] == 1  # 8.9 us against 11.8: over 1.05x
    kernels.write_text(json.dumps(_lines(SHAPE, 1, 1)[0]) + "\n{oops\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.quality_ceiling", str(kernels),
                           "--log", LOG], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1 and f"{kernels}:2: not a JSON line" in proc.stderr
