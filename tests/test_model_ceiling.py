"""torchgen_ah.evaluation.studies.model_ceiling on the committed replay log: the most GEMM selection could save per
model step, the GEMMs the log lacks, and bad input named by file and line."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("pandas")

from torchgen_ah.evaluation.studies import model_ceiling  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = os.path.join(REPO, "datasets", "h200_replay", "h200_replay_mm.txt.gz")


@pytest.fixture(scope="module")
def logged():
    return model_ceiling.logged_times(LOG)


def test_every_model_gemm_but_gpt2s_vocabulary_projection_is_in_the_log(logged):
    missing = {g for gemms in model_ceiling.MODEL_GEMMS.values() for g, _ in gemms if g not in logged}
    assert missing == {"2048x768x50257 bfloat16 NT"}


def test_the_saving_counts_each_call_where_a_template_beats_cublas(logged):
    rows = {r["model"]: r for r in model_ceiling.model_rows({"llama_decode": 0.5, "llama_prefill": 2.0, "gpt2": 1.2},
                                                              logged)}
    expected = sum(calls * (logged[g][0] - logged[g][1]) * 1000 for g, calls in model_ceiling.MODEL_GEMMS["llama_decode"]
                   if logged[g][1] is not None and logged[g][1] < logged[g][0])
    assert expected > 0 and rows["llama_decode"]["saving_us"] == pytest.approx(expected)
    assert rows["llama_decode"]["ceiling"] == pytest.approx((500 - expected) / 500)
    assert rows["llama_prefill"]["saving_us"] == 0 and rows["llama_prefill"]["ceiling"] == 1.0  # cuBLAS everywhere
    assert rows["gpt2"]["not_in_log"] == ["2048x768x50257 bfloat16 NT"]
    assert "vit" not in rows  # no off step given


def test_the_command_line_takes_offs_median_step_and_names_bad_lines(tmp_path):
    e2e = tmp_path / "results.jsonl"
    lines = [{"model": "llama_decode", "mode": "off", "step_ms": s} for s in (0.40, 0.50, 0.45)]
    lines.append({"model": "llama_decode", "mode": "fast", "step_ms": 9.0})
    e2e.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert model_ceiling.off_steps([str(e2e)]) == {"llama_decode": 0.45}
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.model_ceiling", "--e2e", str(e2e),
                           "--log", LOG], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| llama_decode | 0.450 | 29 |" in proc.stdout
    e2e.write_text(json.dumps(lines[0]) + "\n" + json.dumps({"mode": "off"}) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.model_ceiling", "--e2e", str(e2e),
                           "--log", LOG], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 1 and f"{e2e}:2: an e2e_models results line needs 'model'" in proc.stderr
