"""The numerical check inside a user's compile (CPU path, real Inductor, freezing, packed_linear).

One subprocess, two shapes that miss the results cache with tuning on:
(1) atol=rtol=0: the C++ micro-GEMM's output differs from MKL's in the last bits at K=512, so the
    check drops it; only the aten choice is left (Inductor benchmarks nothing) and is recorded;
(2) atol=rtol=1e-3: both candidates pass and Inductor benchmarks both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from ah_plugin.tunable import results_file as F
from linear_child import PRELUDE, child_env

SCRIPT = PRELUDE + textwrap.dedent(
    """
    for (m, k, n), tolerance in json.loads(sys.argv[1]):
        tunable.set_numerical_check_tolerances(True, tolerance, tolerance)
        benchmarked.clear()
        before = tunable.get_stats()["rejected_candidates"]
        ok, source = compile_linear(m, k, n, 1e-5)
        out["runs"].append({"ok": ok, "benchmarked": list(benchmarked),
                            "rejected": tunable.get_stats()["rejected_candidates"] - before,
                            "mkl": "_mkl_linear" in source, "cpp_gemm": "micro_gemm" in source})
    tunable.write_file()
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.slow
def test_numerical_check_drops_candidates_beyond_tolerance(tmp_path):
    results = tmp_path / "results0.csv"
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), AH_TUNABLE_ENABLED="1",
                    AH_TUNABLE_FILENAME=str(tmp_path / "results%d.csv"))
    cases = [[[64, 512, 96], 0.0], [[33, 300, 50], 1e-3]]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "numerical check failed" not in proc.stderr, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    strict, loose = json.loads(line[len("RESULT "):])["runs"]
    written = F.read_results(str(results), F.current_validators())
    assert not written.rejected

    # (1) exact tolerances: the C++ template is dropped before benchmarking, aten compiled and recorded.
    assert strict["ok"] and strict["rejected"] == 1, strict
    assert all(cid.startswith("extern_") for _, ids in strict["benchmarked"] for cid in ids), strict
    assert strict["mkl"] and not strict["cpp_gemm"], strict
    assert written.entries[("packed_linear", "NN_64_96_512_ld_512_96_float32")].solution == "extern__mkl_linear"

    # (2) loose tolerances: both pass, both benchmarked, the faster recorded.
    assert loose["ok"] and loose["rejected"] == 0, loose
    ((op, timed),) = loose["benchmarked"]
    assert op == "packed_linear" and len(timed) == 2 and any(c.startswith("cpp_") for c in timed), loose
    assert written.entries[("packed_linear", "NN_33_50_300_ld_300_50_float32")].solution in timed
