"""compile_cost's results-cache check on the CPU, for real: a record process tunes the frozen linear and
writes the results file, a fresh hit process reads it, benchmarks nothing and generates the record run's
code (the same kernels, found without timing them)."""

import json

import pytest
from compile_cost_run import run_compile_cost


@pytest.mark.slow
def test_the_hit_run_benchmarks_nothing_and_generates_the_record_runs_code(tmp_path):
    out = run_compile_cost(tmp_path, ["packed_linear,64,256,128,1,float32,NN"], "--modes", "cache", "--max-minutes", "4")
    lines = {json.loads(ln)["mode"]: json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()}
    record, hit = lines["cache_record"], lines["cache"]
    assert any(len(t) > 1 for t in record["timings"])  # the record run tuned: several choices timed
    assert hit["timings"] == []  # the hit run timed nothing
    assert record["code"] and record["code"] == hit["code"]
    rows = [r for r in (out / "tunable_results.csv").read_text().splitlines() if r.startswith("packed_linear,")]
    assert len(rows) == 1, rows
    assert "| packed_linear 64x256x128 float32 NN | - | - | - | 0 | yes |" in (out / "compile_cost.md").read_text()
