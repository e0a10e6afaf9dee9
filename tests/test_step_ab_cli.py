"""benchmarks/step_ab.py on the CPU: every variant compiles for real in one process (none reuses another's
graph), computes the model's result, and the report and generated code are written."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "step_ab.py")


@pytest.mark.slow
def test_every_variant_compiles_its_own_graph_and_is_timed(tmp_path):
    out, results, code = tmp_path / "ab.json", tmp_path / "RESULTS.md", tmp_path / "code"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    proc = subprocess.run([sys.executable, SCRIPT, "--model", "mlp", "--windows", "2", "--device", "cpu",
                           "--json", str(out), "--results", str(results), "--code-dir", str(code)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["off", "fast", "fast_no_l2", "aten_gemm", "off_plugin", "off_again"]
    plugin = {r["variant"]: (r["plugin"]["use"], r["plugin"]["l2_rule"]) for r in rows}
    assert plugin == {"off": ([], True), "fast": (["mm"], True), "fast_no_l2": (["mm"], False),
                      "aten_gemm": ([], True), "off_plugin": (["mm"], True), "off_again": ([], True)}
    for r in rows:
        assert r["code"]["graphs"] == 1, r  # its own compile: Dynamo did not hand it another variant's graph
        # the three linear layers, each one aten call (addmm, or bias_addmm under max-autotune on torch 2.11)
        assert sum(n for name, n in r["code"]["extern_calls"].items() if name.endswith("addmm")) == 3, r
        assert r["max_rel_err"] < 1e-4 and r["step_ms"] > 0 and len(r["windows_ms"]) == 2, r
    assert len(list(code.iterdir())) == 6
    # off and its A/A control generate the same kernels: one code hash (tests/test_generated_code.py: it
    # changes with the code)
    fingerprints = {r["variant"]: r["code"]["fingerprint"] for r in rows}
    assert fingerprints["off"] == fingerprints["off_again"] == fingerprints["off_plugin"], fingerprints
    text = results.read_text()
    assert "step_ab_mlp" in text and "| off_plugin |" in text


def test_plugin_variables_from_outside_are_refused_by_name(tmp_path):
    """A set AH_PLUGIN_L2_RULE would override the variants' own settings: refused, nothing measured."""
    env = dict(os.environ, AH_PLUGIN_L2_RULE="off", PYTHONPATH=REPO)
    out = tmp_path / "ab.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--model", "mlp", "--device", "cpu", "--json", str(out),
                           "--no-write"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "unset AH_PLUGIN_L2_RULE" in proc.stderr and not out.exists()


def test_bad_variants_and_windows_are_refused_by_name():
    for args, message in ((["--variants", "off,fastest"], "unknown variant fastest"),
                          (["--windows", "0"], "--windows must be at least 1")):
        proc = subprocess.run([sys.executable, SCRIPT, *args, "--no-write"], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


@pytest.mark.slow
def test_copies_compile_each_variant_again_and_report_the_median_over_copies(tmp_path):
    """--copies 2: off, fast, off#2, fast#2, each its own compile of the same code as its first copy; a
    table of each variant's median over its copies."""
    out = tmp_path / "ab.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    proc = subprocess.run([sys.executable, SCRIPT, "--model", "mlp", "--windows", "2", "--device", "cpu",
                           "--variants", "off,fast", "--copies", "2", "--json", str(out), "--no-write"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["variant"], r["base"], r["copy"]) for r in rows] == [
        ("off", "off", 1), ("fast", "fast", 1), ("off#2", "off", 2), ("fast#2", "fast", 2)]
    for r in rows:
        assert r["code"]["graphs"] == 1 and r["max_rel_err"] < 1e-4, r  # compiled afresh, right result
    code = {r["variant"]: r["code"]["fingerprint"] for r in rows}
    assert code["off"] == code["off#2"] and code["fast"] == code["fast#2"], code
    assert rows[3]["plugin"]["use"] == ["mm"] and rows[2]["plugin"]["use"] == []
    assert "Over the compiled copies" in proc.stdout and "| fast | 2 |" in proc.stdout


def test_too_many_copies_are_refused_by_name():
    proc = subprocess.run([sys.executable, SCRIPT, "--copies", "99", "--no-write"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--copies must be 1 to" in proc.stderr, proc.stderr
