"""The whole loop on a small model: collect, train, use, and the results cache, one process per mode.

    python -m ah_plugin.demo              # collect, train, use, cache: 2-3 minutes on a 2-core CPU
    python -m ah_plugin.demo --quick      # one layer shape; collect, train, use
    python -m ah_plugin.demo --baseline   # also Inductor's default max-autotune first, for comparison

On a CUDA machine the model's matmuls are ``mm`` autotuned over Triton templates; on the CPU they are
``packed_linear`` (``freezing`` on, weights constant under ``no_grad``), autotuned over MKL and the C++
GEMM template. Each mode runs in a fresh process with a fresh Inductor cache directory, so compile
times are honest, and prints: compile seconds, choices benchmarked, and whether outputs matched eager.

Modes: ``default`` (plugin off), ``collect`` (every choice timed and logged), ``use`` (the artifact
trained from that log prunes autotuning), ``cache-record`` (the results cache records each winner) and
``cache`` (exact shapes answered from the results file, no benchmarking).

Offline: nothing is downloaded. The worker observes autotuning through Inductor's own public callbacks
(independent of the plugin), so what it reports is what Inductor did.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

RESULT_PREFIX = "AH_DEMO_RESULT "

# variables a mode sets; all removed from the parent's environment first so modes do not leak
_MODE_VARIABLE_PREFIXES = ("TORCHINDUCTOR_AUTOHEURISTIC_", "AH_PLUGIN_", "AH_TUNABLE_")



# --------------------------------------------------------------------------------------------------
# the workload (runs in the worker process)


def workload(quick: bool, cuda: bool) -> dict:
    """Layer widths, batch sizes, dtype and the op Inductor autotunes for them."""
    if cuda:
        dims = [1024, 2048, 512] if not quick else [1024, 2048]
        return {"dims": dims, "batches": [512] if quick else [256, 2048], "dtype": "bfloat16", "op": "mm",
                "device": "cuda", "compile_mode": "max-autotune-no-cudagraphs"}
    dims = [64, 96, 48] if not quick else [64, 96]
    return {"dims": dims, "batches": [32], "dtype": "float32",
            "op": "packed_linear", "device": "cpu", "compile_mode": "max-autotune"}


def run_worker(spec: dict) -> dict:
    """Compile the model for each batch size; return compile time, autotunings, eager agreement."""
    import torch

    from ah_plugin import inductor  # the worker process needs the adapter: it is switched on anyway
    from ah_plugin.inductor import compile_tools

    inductor.install()  # idempotent; makes the observer below run after the plugin's pruning
    records: list = []
    compile_tools.observe_autotunings(records)
    device = spec["device"]
    dtype = getattr(torch, spec["dtype"])
    if device == "cpu":
        compile_tools.freeze_constant_weights()

    torch.manual_seed(0)
    dims = spec.get("dims") or [1, 1]

    class TinyMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = torch.nn.ParameterList(
                torch.nn.Parameter(torch.randn(a, b, dtype=dtype, device=device) / a**0.5)
                for a, b in zip(dims[:-1], dims[1:])
            )

        def forward(self, x):
            for i, w in enumerate(self.weights):
                x = x @ w
                if i + 1 < len(self.weights):
                    x = torch.relu(x)
            return x

    class MatMul(torch.nn.Module):
        """One ``x @ w`` (spec["shapes"]: explicit (m, k, n) inputs instead of the MLP)."""

        def __init__(self, k, n):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(k, n, dtype=dtype, device=device) / k**0.5)

        def forward(self, x):
            return x @ self.w

    if spec.get("shapes"):
        cases = [(MatMul(k, n).eval(), m, k) for m, k, n in spec["shapes"]]
    else:
        mlp = TinyMLP().eval()
        cases = [(mlp, batch, dims[0]) for batch in spec["batches"]]
    tol = 1e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3
    compile_s, matched, max_err = 0.0, True, 0.0
    compiled_of = {}
    with torch.no_grad():
        for model, rows, cols in cases:
            compiled = compiled_of.get(id(model))
            if compiled is None:
                compiled = compiled_of[id(model)] = torch.compile(model, mode=spec["compile_mode"], dynamic=False)
            x = torch.randn(rows, cols, dtype=dtype, device=device)
            expected = model(x)
            start = time.perf_counter()
            out = compiled(x)
            if device == "cuda":
                torch.cuda.synchronize()
            compile_s += time.perf_counter() - start
            err = (out.float() - expected.float()).abs().max().item()
            max_err = max(max_err, err)
            matched &= bool(torch.allclose(out.float(), expected.float(), atol=tol, rtol=tol))
    stale = []
    try:
        from ah_plugin import ranking

        stale = ranking.stale_report()
    except Exception:
        pass
    return {"compile_s": compile_s, "autotunings": records, "matched": matched, "max_abs_err": max_err,
            "stale": stale}


# --------------------------------------------------------------------------------------------------
# the driver (parent process)


def clean_environment(extra: dict, cache_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_MODE_VARIABLE_PREFIXES)}
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env.update(extra)
    return env


def run_mode(name: str, spec: dict, workdir: str, extra_env: dict, timeout: float = 600) -> dict:
    """Run one mode in a fresh process with a fresh Inductor cache dir; return the worker's result."""
    cache_dir = os.path.join(workdir, f"inductor-cache-{name}")
    os.makedirs(cache_dir, exist_ok=True)
    env = clean_environment(extra_env, cache_dir)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ah_plugin.demo", "--worker", json.dumps(spec)],
        env=env, capture_output=True, text=True, timeout=timeout,
    )
    wall = time.perf_counter() - start
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
    if proc.returncode != 0 or result is None:
        raise RuntimeError(
            f"demo mode {name!r} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    result.update(mode=name, wall_s=wall, env={k: v for k, v in extra_env.items()}, stderr=proc.stderr)
    return result


def train_artifact(log_path: str, op: str, out_dir: str) -> str:
    """Train a heuristic from the collected log with our trainer, in its own process (the trainer uses
    scikit-learn, which ``ah_plugin`` never imports); return the artifact's path.

    The log's own feature columns suffice for a demo's handful of inputs (mm included); the mm trainer
    (``torchgen_ah.mm.train_decision_mm``) adds derived features for real datasets.
    """
    name = "".join(part.capitalize() for part in op.split("_")) + "RankingDemo"
    command = [sys.executable, "-m", "torchgen_ah.train_generic", log_path, "--heuristic-name", name, "--out", out_dir]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"training failed (exit {proc.returncode}): {' '.join(command)}\n{proc.stderr[-3000:]}")
    return os.path.join(out_dir, f"_{name}.py")


def cache_envs(workdir: str) -> tuple[dict, dict] | None:
    """Hook for the results cache (``ah_plugin.tunable``): variables that record winners (tuning on),
    and variables that answer from the recorded file. None when the package is absent."""
    try:
        import ah_plugin.tunable  # noqa: F401
    except Exception:
        return None
    results = os.path.join(workdir, "tunable_results.csv")
    record = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_TUNING": "1", "AH_TUNABLE_FILENAME": results}
    hit = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_TUNING": "0", "AH_TUNABLE_FILENAME": results}
    return record, hit


def summarize(result: dict) -> dict:
    autotunings = result["autotunings"]
    return {
        "mode": result["mode"],
        "compile_s": result["compile_s"],
        "autotunings": len(autotunings),
        "benchmarked": sum(len(a["timed"]) for a in autotunings),
        "offered": sum(len(a["offered"]) for a in autotunings),
        "matched": result["matched"],
    }


def markdown(rows: list[dict]) -> str:
    lines = ["| mode | compile s | autotunings | choices left | choices benchmarked | matched eager |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['compile_s']:.1f} | {r['autotunings']} | {r['offered']} | "
                     f"{r['benchmarked']} | {'yes' if r['matched'] else 'NO'} |")
    return "\n".join(lines)


def run_demo(workdir: str, quick: bool = False, baseline: bool = False, out=print) -> dict:
    """Run every mode; print a markdown table of their summaries.

    Returns ``{"spec", "log_path", "artifact_path", "results": {mode: worker result}, "rows"}``.
    """
    import torch

    cuda = torch.cuda.is_available()
    spec = workload(quick, cuda)
    op = spec["op"]
    out(f"ah_plugin demo: {op} on {'CUDA' if cuda else 'CPU'}, layers {spec['dims']}, "
        f"batches {spec['batches']}, work dir {workdir}")
    log_path = os.path.join(workdir, f"{op}_log.txt")
    artifact_dir = os.path.join(workdir, "artifacts")
    use_env = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": op, "AH_PLUGIN_ARTIFACT_DIR": artifact_dir}
    rows, results = [], {}

    def mode(name, env):
        out(f"-- {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or '(no plugin variables)'}")
        result = results[name] = run_mode(name, spec, workdir, env)
        row = summarize(result)
        out(f"   compile {row['compile_s']:.1f} s, {row['benchmarked']} choices benchmarked in "
            f"{row['autotunings']} autotunings, outputs {'match' if row['matched'] else 'DO NOT match'} eager")
        rows.append(row)
        return result

    cache = None if quick else cache_envs(workdir)
    if baseline:
        mode("default", {"AH_PLUGIN_DISABLE": "1"})
    mode("collect", {"TORCHINDUCTOR_AUTOHEURISTIC_COLLECT": op, "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH": log_path})
    start = time.perf_counter()
    path = train_artifact(log_path, op, artifact_dir)
    out(f"-- train: {os.path.basename(path)} in {time.perf_counter() - start:.1f} s")
    mode("use", use_env)
    if cache is not None:
        mode("cache-record", cache[0])  # Inductor autotunes; the cache records each winner
        mode("cache", cache[1])  # exact shapes answered from the results file
    out("")
    out(markdown(rows))
    return {"spec": spec, "log_path": log_path, "artifact_path": path, "results": results, "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ah_plugin.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one layer shape, collect and use only")
    parser.add_argument("--baseline", action="store_true",
                        help="also run Inductor's default max-autotune (plugin off) first")
    parser.add_argument("--workdir", help="keep logs, artifacts and caches here (default: a temp dir)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = run_worker(json.loads(args.worker))
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        rows = run_demo(args.workdir, args.quick, args.baseline)["rows"]
    else:
        with tempfile.TemporaryDirectory(prefix="ah_plugin_demo_") as workdir:
            rows = run_demo(workdir, args.quick, args.baseline)["rows"]
    return 0 if all(r["matched"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
