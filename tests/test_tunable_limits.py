"""Max tuning duration/iterations on the CPU path (real Inductor, freezing, packed_linear).

One subprocess; a spy *below* the plugin's wrapper records the keyword arguments torch's
`benchmark_cpu` really receives and counts how often it runs the benchmarked callable:
(1) a tuning miss with 1 ms / 1 iteration: every candidate is timed with rep=1 ms and takes far less
    time than (2) with the cache off (Inductor's own rep, untouched: nothing leaks from (1));
(3) a tuning miss with the defaults (30 ms / 100): rep=min(100, 30);
(4) a cache hit: nothing benchmarked, no limits asked for.
One shape throughout (the results are cleared before each miss), so its C++ code is compiled once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from linear_child import PRELUDE, child_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = PRELUDE + textwrap.dedent(
    """
    import functools, os, time
    from torch._inductor.runtime.benchmarking import benchmarker

    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    calls = []  # (rep keyword as torch's benchmark_cpu receives it, runs of the callable, ms spent)
    original = type(benchmarker).benchmark_cpu

    @functools.wraps(original)
    def spy(self, _callable, *args, **kwargs):
        runs = [0]
        def counted():
            runs[0] += 1
            return _callable()
        start = time.perf_counter()
        try:
            return original(self, counted, *args, **kwargs)
        finally:
            calls.append((kwargs.get("rep", "default"), runs[0], 1e3 * (time.perf_counter() - start)))
    type(benchmarker).benchmark_cpu = spy

    from ah_plugin.tunable.store import store
    for label, (m, k, n), enabled, duration, iterations in json.loads(sys.argv[1]):
        if label != "hit":  # a miss, on the same shape (its C++ code is compiled once for all cases):
            store().clear()  # nothing in memory, and nothing in the file (each winner is written at once)
            if os.path.exists(tunable.get_filename()):
                os.remove(tunable.get_filename())
        tunable.enable(enabled)
        tunable.set_max_tuning_duration(duration)
        tunable.set_max_tuning_iterations(iterations)
        calls.clear()
        before = tunable.get_stats()
        torch.compiler.reset()
        module = Linear(k, n).eval()
        x = torch.randn(m, k)
        with torch.no_grad():
            y = torch.compile(module, mode="max-autotune-no-cudagraphs", dynamic=False)(x)
        after = tunable.get_stats()
        out["runs"].append({"label": label, "ok": bool(torch.allclose(y, x @ module.w, atol=1e-4, rtol=1e-4)),
                            "calls": list(calls), "limited": after["limited"] - before["limited"],
                            "hits": after["hits"] - before["hits"]})
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.slow
def test_max_tuning_duration_and_iterations_bound_tuning_benchmarks(tmp_path):
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
                    AH_TUNABLE_FILENAME=str(tmp_path / "results%d.csv"))
    cases = [
        ["tiny", [40, 64, 48], True, 1, 1],
        ["off", [40, 64, 48], False, 1, 1],
        ["default", [40, 64, 48], True, 30, 100],
        ["hit", [40, 64, 48], True, 1, 1],
    ]
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    runs = {r["label"]: r for r in json.loads(line[len("RESULT "):])["runs"]}
    assert all(r["ok"] for r in runs.values()), runs

    tiny, off, default, hit = runs["tiny"], runs["off"], runs["default"], runs["hit"]
    # (1) both candidates (aten and the C++ template) timed with rep=1 ms, asked once for this miss
    assert len(tiny["calls"]) >= 2 and all(rep == 1 for rep, *_ in tiny["calls"]), tiny
    assert tiny["limited"] == 1, tiny
    # (2) cache off: Inductor's own rep (100 ms passed by benchmark(), or the signature default)
    assert len(off["calls"]) >= 2 and all(rep in (100, "default") for rep, *_ in off["calls"]), off
    assert off["limited"] == 0, off
    # measurably less benchmarking: torch's loop runs the callable for warm-up + rep ms (warm-up 20-25 ms),
    # so the cache-off calls take >= 120 ms each and the limited ones about 21-26 ms plus one run
    spent = lambda r: sum(ms for _, _, ms in r["calls"])  # noqa: E731
    assert spent(off) >= 120 * len(off["calls"]), off
    assert spent(tiny) < 0.5 * spent(off), (tiny, off)
    # (3) defaults: rep = min(100, 30) ms
    assert len(default["calls"]) >= 2 and all(rep == 30 for rep, *_ in default["calls"]), default
    # (4) a hit: one choice left, nothing benchmarked, no limits asked for
    assert hit["hits"] == 1 and hit["calls"] == [] and hit["limited"] == 0, hit


def test_limit_maps_follow_the_benchmarker_signatures():
    """Torch's own benchmarker classes map onto the keywords the docs name; anything else: no limit."""
    from torch._inductor.runtime import benchmarking

    from ah_plugin.inductor.patches import benchmarker as hooks

    saved = hooks._Wrapped.benchmarker
    names = lambda plan: {keyword: limit for keyword, (limit, _) in plan.items()}  # noqa: E731
    try:
        inductor = benchmarking.InductorBenchmarker()
        hooks._Wrapped.benchmarker = inductor
        assert names(hooks._limit_plan("benchmark_gpu", inductor.benchmark_gpu)) == {
            "benchmark_iters": "iterations", "max_benchmark_duration": "duration_ms"}
        assert names(hooks._limit_plan("benchmark_cpu", inductor.benchmark_cpu)) == {"rep": "duration_ms"}
        if hasattr(benchmarking, "TorchProfilerBenchmarker"):
            profiler = benchmarking.TorchProfilerBenchmarker()
            hooks._Wrapped.benchmarker = profiler
            assert names(hooks._limit_plan("benchmark_gpu", profiler.benchmark_gpu)) == {
                "rep": "iterations", "max_benchmark_duration": "duration_ms"}
        assert hooks._limit_plan("benchmark_cpu", lambda _callable, seconds=1.0: 0.0) is None
    finally:
        hooks._Wrapped.benchmarker = saved


GPU_SCRIPT = textwrap.dedent(
    """
    import functools, json, sys, torch
    import torch._inductor.config as inductor_config
    from torch._inductor.runtime.benchmarking import benchmarker
    import ah_plugin.tunable as tunable

    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
    calls = []  # keyword arguments the GPU benchmark really receives
    original = type(benchmarker).benchmark_gpu

    @functools.wraps(original)
    def spy(self, _callable, *args, **kwargs):
        calls.append({k: kwargs.get(k) for k in ("benchmark_iters", "max_benchmark_duration", "rep")})
        return original(self, _callable, *args, **kwargs)
    type(benchmarker).benchmark_gpu = spy

    out = {"benchmarker": type(benchmarker).__name__, "runs": []}
    for label, (m, k, n), enabled in json.loads(sys.argv[1]):
        tunable.enable(enabled)
        tunable.set_max_tuning_duration(1)
        tunable.set_max_tuning_iterations(3)
        calls.clear()
        torch.compiler.reset()
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        y = torch.compile(lambda x, w: x @ w, mode="max-autotune-no-cudagraphs", dynamic=False)(a, b)
        ok = torch.allclose(y.float(), (a @ b).float(), rtol=2e-2, atol=2e-1)
        out["runs"].append({"label": label, "ok": bool(ok), "calls": list(calls)})
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_limits_reach_the_inductor_benchmarker(tmp_path):
    """Run on the device machine: ``bash gpu_jobs/tunable_limits.sh``."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AH_", "TORCHINDUCTOR_"))}
    # the limits map onto the per-call benchmarker's keywords: the per-call timing method is what is tested
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               AH_TUNABLE_FILENAME=str(tmp_path / "results%d.csv"), AH_PLUGIN_TIMING="per_call")
    cases = [["limited", [1024, 512, 768], True], ["off", [1024, 512, 640], False]]
    proc = subprocess.run([sys.executable, "-c", GPU_SCRIPT, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    limited, off = result["runs"]
    assert limited["ok"] and off["ok"]
    assert len(limited["calls"]) >= 2 and len(off["calls"]) >= 2, result
    if result["benchmarker"] == "InductorBenchmarker":
        assert all(c["benchmark_iters"] == 3 and c["max_benchmark_duration"] == 1 for c in limited["calls"]), result
        assert all(c["benchmark_iters"] is None and c["max_benchmark_duration"] is None for c in off["calls"]), result
    elif result["benchmarker"] == "TorchProfilerBenchmarker":
        assert all(c["rep"] == 3 and c["max_benchmark_duration"] == 1 for c in limited["calls"]), result
    else:  # triton's do_bench: rep is milliseconds
        assert all(c["rep"] == 1 for c in limited["calls"]), result
