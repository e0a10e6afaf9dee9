"""compile_cost's results-cache check on the CPU, for real: a record process tunes the frozen linear and
writes the results file, a fresh hit process reads it, benchmarks nothing and generates the record run's
code (the same kernels, found without timing them)."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_the_hit_run_benchmarks_nothing_and_generates_the_record_runs_code(tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,m,k,n,batch,dtype,layout\npacked_linear,64,256,128,1,float32,NN\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env["PYTHONPATH"] = REPO
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.compile_cost", str(shapes), "--modes", "cache",
                           "--max-minutes", "4", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = {json.loads(ln)["mode"]: json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()}
    record, hit = lines["cache_record"], lines["cache"]
    assert any(len(t) > 1 for t in record["timings"])  # the record run tuned: several choices timed
    assert hit["timings"] == []  # the hit run timed nothing
    assert record["code"] and record["code"] == hit["code"]
    rows = [r for r in (out / "tunable_results.csv").read_text().splitlines() if r.startswith("packed_linear,")]
    assert len(rows) == 1, rows
    assert "| packed_linear 64x256x128 float32 NN | - | - | - | 0 | yes |" in (out / "compile_cost.md").read_text()
