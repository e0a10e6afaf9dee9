"""The timing worker of the evaluation: one process autotunes each shape several times with the plugin's
collector on, so every choice of the searched space gets repeated timings from one process.

Per shape row: one autotuning over default max-autotune's own space (``AH_PLUGIN_SEARCH_SPACE=default``,
its log defines default's set and the winner a cache would record), then ``reps`` autotunings over the
searched space (``--space``, "wide" by default), each into the shape's own log. The FX graph cache and the
autotune results caches are off, so each repetition re-benchmarks every choice; the compiled-kernel cache
(a fresh ``TORCHINDUCTOR_CACHE_DIR`` per run) stays on, so repetitions skip recompiling the kernels
(measured on the CPU path: 48 s for the first autotuning, 1.6 s for the next).

Timing follows the plugin's setting (``AH_PLUGIN_TIMING``): on CUDA by default each candidate is timed by
CUDA-graph replay (``ah_plugin.replay_timing``); with ``per_call``, by Inductor's own benchmarker
(``InductorBenchmarker.benchmark_gpu`` zeroes a buffer the size of the L2 cache before every timed call,
so a small kernel never runs from a warm L2, and reports the minimum over its iterations). The timing
table then takes the median of each choice's times across autotunings.

Run by ``torchgen_ah.evaluate`` as ``python -m torchgen_ah.evaluation.eval_worker SPEC.json`` (the documented
name ``python -m torchgen_ah.eval_worker`` is the same command) where the spec names the shapes, the output
folder, repetitions and a deadline. Progress goes to ``progress.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import torchgen_ah

# Must be set before torch (and with it the plugin's autoload) is imported.
_COLLECT_OPS = "mm,addmm,bmm,packed_linear"

SHAPE_COLUMNS = ("op", "m", "k", "n", "batch", "dtype", "layout")
OPS = ("mm", "addmm", "bmm", "packed_linear")
LAYOUTS = ("NN", "NT", "TN", "TT")


def shape_label(row: dict) -> str:
    batch = f"{row['batch']}x" if int(row.get("batch") or 1) > 1 else ""
    return f"{row['op']} {batch}{row['m']}x{row['k']}x{row['n']} {row['dtype']} {row['layout']}"


def log_paths(out_dir: str, index: int, op: str) -> tuple[str, str]:
    """(default-space log, searched-space log) of shape ``index``."""
    base = os.path.join(out_dir, "logs")
    return (
        os.path.join(base, f"{index:03d}_{op}_default.txt"),
        os.path.join(base, f"{index:03d}_{op}_searched.txt"),
    )


def _operand(torch, rows: int, cols: int, transposed: bool, dtype, device, batch: int = 0):
    """A [rows, cols] (or [batch, rows, cols]) operand; ``transposed``: a column-major view."""
    lead = (batch,) if batch else ()
    if transposed:
        return torch.randn(*lead, cols, rows, dtype=dtype, device=device).transpose(-1, -2)
    return torch.randn(*lead, rows, cols, dtype=dtype, device=device)


def make_case(torch, row: dict, device: str):
    """(callable, args) computing the row's GEMM on fresh random inputs."""
    dtype = getattr(torch, row["dtype"])
    m, k, n = int(row["m"]), int(row["k"]), int(row["n"])
    t1, t2 = row["layout"][0] == "T", row["layout"][1] == "T"
    op = row["op"]
    if op == "packed_linear":
        # CPU freezing path: a constant weight under no_grad lowers to packed_linear, the GEMM Inductor
        # autotunes on the CPU.
        class Linear(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(k, n, dtype=dtype, device=device))

            def forward(self, x):
                return x @ self.w

        return Linear().eval(), (torch.randn(m, k, dtype=dtype, device=device),)
    if op == "bmm":
        b = int(row["batch"])
        a = _operand(torch, m, k, t1, dtype, device, b)
        w = _operand(torch, k, n, t2, dtype, device, b)
        return torch.bmm, (a, w)
    a = _operand(torch, m, k, t1, dtype, device)
    w = _operand(torch, k, n, t2, dtype, device)
    if op == "addmm":
        return torch.addmm, (torch.randn(n, dtype=dtype, device=device), a, w)
    return torch.mm, (a, w)


def _autotune_once(torch, row, device, space: str, log_path: str) -> float:
    """One fresh compile (and so one autotuning) of the row; returns its wall seconds."""
    from ah_plugin.config import settings

    os.environ[settings.ENV_SEARCH_SPACE] = space
    os.environ[settings.ENV_LOG_PATH] = log_path
    torch.compiler.reset()
    fn, args = make_case(torch, row, device)
    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
    start = time.perf_counter()
    with torch.no_grad():
        compiled(*args)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _environment(torch, device: str) -> dict:
    info = {"torch": torch.__version__, "device": device, "python": sys.version.split()[0]}
    try:  # optional: the CPU path has no Triton
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["device_capa"] = list(torch.cuda.get_device_capability(0))
    return info


def run(spec: dict) -> None:
    import torch  # lazy: torchgen_ah.evaluate imports this module in a parent that never needs torch

    import ah_plugin
    from ah_plugin.inductor import compile_tools

    ah_plugin.require_active_from_environment()  # the plugin this worker was started for, entry point or not

    out_dir = spec["out_dir"]
    device = spec["device"]
    compile_tools.set_options(fx_graph_cache=False, autotune_local_cache=False, autotune_remote_cache=False)
    # every run must autotune the listed shape itself: pad_mm, deciding anew in each run from noisy
    # benchmarks, once padded 17x2048x8192 to 24 rows in the searched runs only (a key default never saw)
    compile_tools.set_options(shape_padding=False)
    if any(row["op"] == "packed_linear" for _, row in spec["shapes"]):
        compile_tools.freeze_constant_weights()
    with open(os.path.join(out_dir, "environment.json"), "w", encoding="utf-8") as f:
        json.dump(_environment(torch, device), f)
    progress = os.path.join(out_dir, "progress.jsonl")
    for index, row in spec["shapes"]:
        if time.time() > spec["deadline"]:
            _note(progress, index, "skipped", 0.0, "time budget spent")
            continue
        _note(progress, index, "started", 0.0, "")
        default_log, searched_log = log_paths(out_dir, index, row["op"])
        start = time.perf_counter()
        try:
            seconds = [_autotune_once(torch, row, device, "default", default_log)]
            for _ in range(spec["reps"]):
                seconds.append(_autotune_once(torch, row, device, spec["space"], searched_log))
        except Exception as exc:  # one bad shape must not lose the others
            _note(progress, index, "error", time.perf_counter() - start, f"{type(exc).__name__}: {exc}")
            traceback.print_exc()
            continue
        _note(progress, index, "ok", time.perf_counter() - start, "", compile_seconds=seconds)


def _note(path: str, index: int, status: str, seconds: float, error: str, **extra) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"index": index, "status": status, "seconds": round(seconds, 3),
                            "error": error, **extra}) + "\n")


def worker_environment(out_dir: str, base_env=None) -> dict:
    """Environment for a worker process: collector on for our ops, fresh Inductor cache folder."""
    env = dict(os.environ if base_env is None else base_env)
    env["TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"] = _COLLECT_OPS
    env.pop("TORCHINDUCTOR_AUTOHEURISTIC_USE", None)
    env.pop("AH_PLUGIN_DISABLE", None)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(out_dir, "inductor_cache")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    return env


def with_package_on_path(env: dict) -> dict:
    """``env`` with the folder holding ``torchgen_ah`` first on PYTHONPATH, so that a worker started with
    ``python -m`` imports this copy of the package whatever its working directory."""
    parent = os.path.dirname(os.path.dirname(os.path.abspath(torchgen_ah.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [parent, env.get("PYTHONPATH")] if p)
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchgen_ah.eval_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="JSON spec written by torchgen_ah.evaluate (shapes, folder, reps, deadline)")
    args = parser.parse_args(argv)
    with open(args.spec, encoding="utf-8") as f:
        run(json.load(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
