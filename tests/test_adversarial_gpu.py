"""The adversarial cases that take another path on a GPU (docs/reliability.md, "On a GPU"): CUDA graphs,
a Triton compile that fails or takes too long in a template the plugin keeps, the device out of memory
while autotuning. Run on a machine with one CUDA GPU (written for torch 2.11, triton 3.6, an H200):

    python -m pytest -q -m gpu tests/test_adversarial_gpu.py

Each case is a fresh Python compiling a bf16 `x @ y` with `torch.compile(mode="max-autotune...")` and the
plugin on (use mode, the results cache), its output compared with eager; a fault is injected where the
case needs one (into Triton's compiler: not the plugin's code). The program must finish (exit code 0) and
every output equal eager's within bf16 tolerance. About 2 minutes in all. The CPU cases are in
tests/test_adversarial_cpu.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from linear_child import child_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU: these cases (CUDA graphs, Triton compiles, device memory) only "
                              "happen there; the CPU ones are in tests/test_adversarial_cpu.py"),
]

SHAPE = (1024, 1024, 1024)  # small: each compile takes seconds
TOLERANCE = 1e-2  # bf16 (the operands are scaled so that outputs are about 1)

# The user's program. cfg: shape, mode, and the faults to inject; prints one RESULT line.
PROGRAM = textwrap.dedent(
    """
    import json, os, sys, time
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor import select_algorithm

    cfg = json.loads(sys.argv[1])
    inductor_config.fx_graph_cache = False  # every run autotunes (or asks the results cache)
    inductor_config.autotune_local_cache = False
    if cfg.get("precompile_timeout_s"):
        inductor_config.precompilation_timeout_seconds = cfg["precompile_timeout_s"]

    import ah_plugin.inductor.adapter as adapter
    offered = []  # ids of the choices Inductor benchmarked, per autotuning
    select_algorithm.add_feedback_saver(
        lambda timings, name, *args, **kwargs: offered.append(adapter.caller_ids(list(timings))))

    def is_template(source):
        name = getattr(source, "name", None) or getattr(getattr(source, "fn", None), "__name__", "") or ""
        return "mm" in name and not name.startswith(("triton_poi", "triton_red", "triton_per"))

    if cfg.get("fault"):  # into Triton's compiler, for the GEMM templates only
        import triton
        real_compile = triton.compile
        def faulty_compile(source, *args, **kwargs):
            if is_template(source):
                if cfg["fault"] == "error":
                    raise RuntimeError("injected: this template does not compile")
                time.sleep(cfg["fault_sleep_s"])
            return real_compile(source, *args, **kwargs)
        triton.compile = faulty_compile

    torch.manual_seed(0)
    m, k, n = cfg["shape"]
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    expected = (a @ b).float()
    held = None
    if cfg.get("leave_free_mb"):  # the program holds the rest of the device
        free, _ = torch.cuda.mem_get_info()
        held = torch.empty(max(0, free - (cfg["leave_free_mb"] << 20)), dtype=torch.uint8, device="cuda")

    def gemm(x, y):
        return x @ y

    def close(out):
        return bool(torch.allclose(out.float(), expected, atol=cfg["tolerance"], rtol=cfg["tolerance"]))

    result = {"matched": [], "error": None}
    start = time.monotonic()
    try:
        compiled = torch.compile(gemm, mode=cfg["mode"], dynamic=False)
        for _ in range(3):  # with CUDA graphs: warm-up, recording, replay
            result["matched"].append(close(compiled(a, b).clone()))
        if cfg.get("capture"):  # the user captures the compiled GEMM in a CUDA graph of their own
            eager_free = torch.compile(gemm, mode="max-autotune-no-cudagraphs", dynamic=False)
            static_a, static_b = a.clone(), b.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                eager_free(static_a, static_b)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = eager_free(static_a, static_b)
            graph.replay()
            torch.cuda.synchronize()
            result["matched"].append(close(static_out))
        torch.cuda.synchronize()
    except Exception as error:  # a failed compile is the program's own to handle: reported, not hidden
        result["error"] = f"{type(error).__name__}: {error}"[:3000]
    import ah_plugin.tunable as tunable
    result.update(seconds=time.monotonic() - start, stats=tunable.get_stats(), offered=offered)
    print("RESULT " + json.dumps(result), flush=True)
    """
)


def run(tmp_path, name: str, cfg: dict, timeout: float = 240, **variables) -> dict:
    """Run the program in a fresh Python with fresh Inductor and Triton caches; its RESULT, or a failed test
    naming what the program printed."""
    cfg = {"shape": SHAPE, "mode": "max-autotune-no-cudagraphs", "tolerance": TOLERANCE, **cfg}
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor_{name}"),
                    TRITON_CACHE_DIR=str(tmp_path / f"triton_{name}"), **variables)
    proc = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(cfg)], env=env, capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"{name}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["stderr"] = proc.stderr
    return result


def assert_equal_to_eager(result: dict, name: str) -> None:
    assert result["error"] is None, f"{name}: the compile failed: {result['error']}\n{result['stderr'][-4000:]}"
    assert result["matched"] and all(result["matched"]), f"{name}: an output differs from eager: {result['matched']}"


def cache_variables(results) -> dict:
    return {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": str(results)}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """One max-autotune of SHAPE with the results cache on and use mode keeping two templates and aten: the
    winner recorded (a file with this process's validators) and the choices Inductor benchmarked."""
    base = tmp_path_factory.mktemp("catalog")
    results = base / "results.csv"
    result = run(base, "catalog", {}, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K="2",
                 **cache_variables(results))
    assert_equal_to_eager(result, "catalog")
    return results, [cid for ids in result["offered"] for cid in ids]


def test_cuda_graphs_tuning_then_hit_and_a_users_own_capture(tmp_path):
    """`mode="max-autotune"` (CUDA graphs on) with use mode and the results cache: the tuning run and the
    hit run both equal eager on every call, replays included, and the hit run benchmarks nothing; the
    compiled GEMM captured in the user's own CUDA graph replays correctly. Use mode with a fixed top two
    (AH_PLUGIN_TOP_K=2, not fast mode): fast mode keeps aten alone for this GEMM and lowers it as off, so it
    tunes and records nothing (tests/test_fast_gpu.py covers that path)."""
    results = tmp_path / "results.csv"
    variables = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_TOP_K": "2", **cache_variables(results)}
    tuning = run(tmp_path, "tuning", {"mode": "max-autotune", "capture": True}, **variables)
    assert_equal_to_eager(tuning, "tuning run")
    assert tuning["stats"]["tuned"] >= 1, tuning["stats"]
    hit = run(tmp_path, "hit", {"mode": "max-autotune", "capture": True}, **variables)
    assert_equal_to_eager(hit, "hit run")
    assert hit["stats"]["hits"] >= 1 and hit["stats"]["tuned"] == 0 and not hit["offered"], hit["stats"]


def test_a_template_that_fails_to_compile_while_tuning(tmp_path):
    """Use mode keeps its two best templates and aten (AH_PLUGIN_TOP_K=2); Triton's compiler raises for
    every GEMM template: the templates drop out, aten wins, the output equals eager."""
    result = run(tmp_path, "tuning_error", {"fault": "error"}, TORCHINDUCTOR_COMPILE_THREADS="1",
                 TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K="2",
                 **cache_variables(tmp_path / "results.csv"))
    assert_equal_to_eager(result, "a template failing to compile while tuning")


def test_a_kept_template_that_fails_to_compile(tmp_path, catalog):
    """The results file keeps one Triton template for SHAPE (a hit: nothing else is offered), and Triton's
    compiler raises for it: the program goes on and its output equals eager (the plugin must not leave
    the compile with nothing that builds)."""
    catalog_results, offered = catalog
    templates = [cid for cid in offered if cid.startswith("type=triton")]
    if not templates:
        pytest.skip("Inductor offered no Triton template for this GEMM on this GPU (its GEMM backends exclude "
                    "Triton?): there is no template to keep")
    lines = catalog_results.read_text().splitlines()
    validators = [line for line in lines if line.startswith("Validator,")]
    (row,) = [line for line in lines if line.startswith("mm,")]
    results = tmp_path / "pinned.csv"
    results.write_text("\n".join(validators + [f"mm,{row.split(',')[1]},{templates[0]},0"]) + "\n")
    result = run(tmp_path, "kept_error", {"fault": "error"}, TORCHINDUCTOR_COMPILE_THREADS="1",
                 AH_TUNABLE_TUNING="0", **cache_variables(results))
    assert result["stats"]["hits"] >= 1, result["stats"]  # the pinned template was the one kept
    assert_equal_to_eager(result, "a kept template failing to compile")


def test_a_template_compile_that_takes_too_long(tmp_path):
    """Triton's compiler takes 12 s for the GEMM template use mode keeps besides aten, more than Inductor's
    precompile limit (4 s here): the program finishes, with an output equal to eager."""
    result = run(tmp_path, "slow_compile", {"fault": "sleep", "fault_sleep_s": 12, "precompile_timeout_s": 4},
                 TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K="1",
                 **cache_variables(tmp_path / "results.csv"))
    assert_equal_to_eager(result, "a template compile that takes too long")
    assert result["seconds"] < 75, result["seconds"]


def test_the_device_out_of_memory_while_autotuning(tmp_path):
    """The program holds all but 512 MiB of the device, then compiles a 4096^3 GEMM (32 MiB operands): the
    benchmarks' inputs, buffers and CUDA graphs compete for what is left. With the plugin the program
    finishes with an output equal to eager; if the compile fails, it fails without the plugin too (the
    plugin does no worse than Inductor alone)."""
    cfg = {"shape": [4096, 4096, 4096], "leave_free_mb": 512}
    plugin = run(tmp_path, "oom_plugin", cfg, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
                 **cache_variables(tmp_path / "results.csv"))
    if plugin["error"] is None:
        assert_equal_to_eager(plugin, "out of memory while autotuning, with the plugin")
        return
    alone = run(tmp_path, "oom_alone", cfg, AH_PLUGIN_DISABLE="1")
    assert alone["error"] is not None, (
        f"without the plugin the compile succeeds, with it it fails: {plugin['error']}\n{plugin['stderr'][-4000:]}")
