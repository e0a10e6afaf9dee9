"""The side-by-side timing of compile_cost: each mode's generated modules, saved by its fresh process, run
again in one process, modes interleaved. Real compiles on the CPU path (the modules are Inductor's own
output, run through its harness), real files and the real report."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from compile_cost_run import REPO, clean_env, run_compile_cost
from torchgen_ah.evaluation import compile_cost, kernel_times, side_by_side


def test_rounds_rotate_the_order_so_no_mode_always_runs_first():
    order = []

    def timer(fn):
        order.append(fn())
        return 1.0

    times = side_by_side.interleaved({"off": lambda: "off", "default": lambda: "default", "fast": lambda: "fast"},
                                     3, timer)
    assert order == ["off", "default", "fast", "default", "fast", "off", "fast", "off", "default"]
    assert times == {"off": [1.0] * 3, "default": [1.0] * 3, "fast": [1.0] * 3}


def test_the_plan_takes_each_processes_first_compile_that_saved_code_where_two_can_be_compared():
    lines = [{"mode": "off", "op": "mm", "shape": "s", "rep": 0, "proc": 0, "code_files": ["code/off_p0_000_0.py"]},
             {"mode": "fast", "op": "mm", "shape": "s", "rep": 0, "proc": 1, "code_files": ["code/fast_p1_000_0.py"]},
             {"mode": "replay_all", "op": "mm", "shape": "s", "rep": 1, "proc": 0, "code_files": ["x.py"]},
             {"mode": "default", "op": "mm", "shape": "s", "rep": 0, "proc": 0},  # nothing saved (an older run)
             {"mode": "off", "op": "mm", "shape": "alone", "rep": 0, "proc": 0, "code_files": ["code/a.py"]}]
    assert side_by_side.plan(lines) == {"s": [("off", 0, "mm", ["code/off_p0_000_0.py"]),
                                              ("fast", 1, "mm", ["code/fast_p1_000_0.py"])]}
    assert side_by_side.run("unused", lines[-1:], "cpu", 5, 60).startswith("skipped")


def test_a_saved_file_that_is_not_a_generated_module_is_named(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def call(args):\n    return args\n")  # no get_args: not Inductor's harness
    with pytest.raises(side_by_side.GeneratedModuleError, match=r"broken\.py: no get_args\(\)"):
        side_by_side.load_generated_module(str(broken))
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_module_here\n")
    with pytest.raises(side_by_side.GeneratedModuleError, match=r"bad\.py: cannot be loaded: ModuleNotFoundError"):
        side_by_side.load_generated_module(str(bad))


def test_the_modes_triton_caches_are_linked_into_one_folder_once_per_kernel(tmp_path):
    for mode, keys in (("off", ["k1"]), ("default", ["k1", "k2"]), ("fast", ["k3"])):
        for key in keys:
            folder = tmp_path / "run" / ("proc1" if mode == "fast" else "") / f"caches_{mode}" / "triton" / key
            folder.mkdir(parents=True)
            (folder / "kernel.cubin").write_text(f"{mode} {key}")
    target = tmp_path / "merged"
    assert side_by_side.link_triton_caches(str(tmp_path / "run"), str(target)) == 3
    assert sorted(os.listdir(target)) == ["k1", "k2", "k3"]
    assert (target / "k3" / "kernel.cubin").read_text() == "fast k3"


def test_the_launch_configs_the_modes_tuned_are_found_beside_the_same_kernel_sources(tmp_path):
    for mode, config in (("default", '{"XBLOCK": 64}'), ("fast", '{"XBLOCK": 128}')):
        folder = tmp_path / "run" / f"caches_{mode}" / "inductor" / "ab"
        folder.mkdir(parents=True)
        (folder / "cabcdef.py").write_text("# a kernel's source\n")
        (folder / "cabcdef.best_config").write_text(config)
        (folder / f"c{mode}.best_config").write_text(config)
    target = tmp_path / "fresh_inductor_cache"
    assert side_by_side.link_tuned_configs(str(tmp_path / "run"), str(target)) == 3
    assert sorted(os.listdir(target / "ab")) == ["cabcdef.best_config", "cdefault.best_config", "cfast.best_config"]
    assert (target / "ab" / "cabcdef.best_config").read_text() == '{"XBLOCK": 64}'  # the first by path, once


def _side(mode, shape, ms=None, proc=0, rounds=None, run=None):
    rounds = rounds or [ms] * 6
    ms = statistics.median(rounds)
    line = {"mode": mode, "op": "mm", "shape": shape, "proc": proc, "ms": ms, "replay_ms": ms, "rounds": rounds,
            "method": "cudagraph_replay"}
    return line if run is None else {**line, "run": run}


def _result(mode, shape, ms, code, run=None):
    line = {"mode": mode, "op": "mm", "shape": shape, "rep": 0, "proc": 0, "seconds": 1.0, "replay_ms": ms,
            "timings": [], "code": code}
    return line if run is None else {**line, "run": run}


def test_the_report_judges_the_side_by_side_table_on_its_own_times_and_states_the_noise_of_identical_code():
    per_process = [_result("off", "a", 0.0100, "c1"), _result("default", "a", 0.0110, "c2"),
                   _result("fast", "a", 0.0104, "c1")]
    side = [_side("off", "a", 0.0101), _side("default", "a", 0.0110),
            _side("fast", "a", 0.0100)]
    text = kernel_times.markdown(per_process, side)
    first, second = text.split("The same generated code timed side by side")
    assert "| a | 10.0 | 11.0 | 10.4 | 1.040 |" in first and "geomean 1.040x" in first
    assert "by CUDA-graph replay, modes interleaved over 6 rounds" in second
    assert "| a | 10.1 | 11.0 | 10.0 | 0.990 |" in second and "geomean 0.990x" in second
    # off and fast generated the same code: their side-by-side ratio is the timing's noise
    assert "the same code, side by side: 0.990-0.990x of each other over 1 pairs" in second


def test_side_by_side_ratios_pair_rounds_so_a_drift_over_the_rounds_cancels():
    """The GPU slows down for good in round 3, after off was timed and before fast: the medians over the rounds
    lie 1.33x apart, round by round the two are equal."""
    off = _side("off", "a", rounds=[0.010, 0.010, 0.010, 0.020, 0.020, 0.020])
    fast = _side("fast", "a", rounds=[0.010, 0.010, 0.020, 0.020, 0.020, 0.020])
    [row] = kernel_times.side_rows([off, fast])
    assert (row["off"], row["fast"]) == (0.015, 0.020)
    assert row["fast_vs_best"] == 1.0


def test_combined_runs_are_not_mixed_within_a_shape():
    """A shape's row comes from one run: the latest that timed default on it (else off alone)."""
    side = [_side("off", "a", 0.010, run=0), _side("default", "a", 0.009, run=0), _side("fast", "a", 0.011, run=0),
            _side("off", "a", 0.012, run=1), _side("fast", "a", 0.012, run=1),
            _side("off", "b", 0.010, run=0), _side("fast", "b", 0.010, run=0),
            _side("off", "b", 0.020, run=1), _side("fast", "b", 0.019, run=1)]
    rows = {r["shape"]: r for r in kernel_times.side_rows(side)}
    assert (rows["a"]["run"], rows["a"]["off"], rows["a"]["fast_vs_best"]) == (0, 0.010, 0.011 / 0.009)
    assert (rows["b"]["run"], rows["b"]["default"], rows["b"]["fast_vs_best"]) == (1, None, 0.95)


def test_a_new_run_drops_an_earlier_runs_side_by_side_lines_and_modules(tmp_path):
    out = tmp_path / "out"
    (out / "code").mkdir(parents=True)
    (out / "code" / "off_p0_000_0.py").write_text("# an earlier run's module\n")
    (out / side_by_side.LINES).write_text(json.dumps(_side("fast", "mm 8x8x8 float32 NN", 0.001)) + "\n")
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,m,k,n,batch,dtype,layout\nmm,8,8,8,1,float32,NN\n")
    # no time for any mode: nothing is compiled, and nothing of the earlier run may be reported
    assert compile_cost.main([str(shapes), "--modes", "off", "--device", "cpu", "--max-minutes", "0",
                              "--out", str(out)]) == 1
    assert not (out / side_by_side.LINES).exists() and not (out / "code").exists()


def test_combine_finds_the_side_by_side_lines_kept_beside_a_results_file(tmp_path):
    kept = tmp_path / "kernels_run.jsonl"
    kept.write_text("\n".join(json.dumps({"mode": m, "op": "mm", "shape": "a", "rep": 0, "proc": 0, "seconds": 1.0,
                                          "replay_ms": 0.01, "timings": []}) for m in ("off", "fast")) + "\n")
    (tmp_path / "kernels_run.side_by_side.jsonl").write_text(
        "\n".join(json.dumps(_side(m, "a", ms)) for m, ms in (("off", 0.0100), ("fast", 0.0095))) + "\n")
    out = tmp_path / "out"
    assert compile_cost.main(["--combine", str(kept), "--out", str(out)]) == 0
    assert "| a | 10.0 | - | 9.5 | 0.950 |" in (out / "compile_cost.md").read_text()


@pytest.mark.slow
def test_the_modes_generated_code_is_run_again_in_one_process(tmp_path):
    """Off and default compile a mm on the CPU in their own processes; each saved module runs through
    Inductor's harness and computes the product; the two modes of a shape share their inputs, another
    shape's module does not take them; the side-by-side lines time both modes on both shapes."""
    out = run_compile_cost(tmp_path, ["mm,64,128,32,1,float32,NN", "mm,48,64,40,1,float32,NT"], "--shapes", "2",
                           "--modes", "off,default", "--side-by-side-rounds", "4", "--device", "cpu",
                           "--max-minutes", "5")
    results = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["mode"], r["shape"]) for r in results if r.get("code_files")} == {
        (m, s) for m in ("off", "default") for s in ("mm 64x128x32 float32 NN", "mm 48x64x40 float32 NT")}
    lines = [json.loads(ln) for ln in (out / "side_by_side.jsonl").read_text().splitlines()]
    assert sorted((ln["mode"], ln["shape"]) for ln in lines) == sorted(
        (r["mode"], r["shape"]) for r in results if r.get("code_files"))
    assert all(ln["method"] == "cpu_wall" and len(ln["rounds"]) == 4 and ln["ms"] > 0 for ln in lines)
    report = (out / "compile_cost.md").read_text()
    assert "Modes: off: ok, default: ok, side_by_side: ok" in report
    # each compile's result was checked against eager PyTorch's on the same inputs
    assert all(r["result_error"] is not None and r["result_error"] < 1e-4 for r in results), results
    assert "Results checked against eager PyTorch on the same inputs (4 compiles)" in report and "none above" in report
    check = ("import sys, torch\nfrom torchgen_ah.evaluation.side_by_side import load_generated_module, runner\n"
             "m = load_generated_module(sys.argv[1])\nargs = m.get_args()\nout = m.call(list(args))[0]\n"
             "assert torch.allclose(out, args[0] @ args[1], atol=1e-4), 'wrong product'\n"
             "_, first = runner([sys.argv[1]])\n_, second = runner([sys.argv[2]], first)\n"
             "assert all(a is b for a, b in zip(first[0], second[0])), 'inputs not shared'\n"
             "_, other = runner([sys.argv[3]], first)\nassert other[0][0] is not first[0][0], 'other sizes shared'\n"
             "print('ok', tuple(out.shape), args[1].stride())\n")
    files = {(r["mode"], r["shape"][-2:]): str(out / r["code_files"][0]) for r in results if r.get("code_files")}
    run = subprocess.run([sys.executable, "-c", check, files["off", "NT"], files["default", "NT"], files["off", "NN"]],
                         env=clean_env(), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[:3] == ["ok", "(48,", "40)"] and "(1, 64)" in run.stdout  # the NT operand's strides


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
def test_on_a_gpu_identical_code_times_alike_side_by_side(tmp_path):
    """Off and fast on an aligned bf16 GEMM where fast mode keeps cuBLAS: the same generated code, timed by
    CUDA-graph replay on shared inputs in one process, within 3% of itself."""
    out = run_compile_cost(tmp_path, ["mm,2048,4096,4096,1,bfloat16,NN"], "--shapes", "1", "--modes", "off,fast",
                           "--max-minutes", "4")
    results = {json.loads(ln)["mode"]: json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()}
    assert results["off"]["code"] == results["fast"]["code"], "fast mode did not keep cuBLAS alone here"
    side = {json.loads(ln)["mode"]: json.loads(ln) for ln in (out / "side_by_side.jsonl").read_text().splitlines()}
    assert {line["method"] for line in side.values()} == {"cudagraph_replay"}
    assert 0.97 <= side["fast"]["ms"] / side["off"]["ms"] <= 1.03, side
