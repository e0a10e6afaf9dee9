"""The whole loop on a small model: collect, train, use, and the results cache, one process per mode.

    python -m ah_plugin.demo              # collect, train, use, cache: about 1.5 minutes on a 2-core CPU
    python -m ah_plugin.demo --quick      # one layer shape; collect, train, use
    python -m ah_plugin.demo --baseline   # also Inductor's default max-autotune first, for comparison

Every mode sets the variables as the README shows them (``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm``,
``..._USE=mm``). On a CUDA machine the model's matmuls are ``mm`` autotuned over Triton templates. On the
CPU, Inductor autotunes a GEMM only when its weight is a constant (``freezing`` on, the model run under
``no_grad``), and names it ``packed_linear`` (MKL against the C++ GEMM template), which ``mm`` covers; so
the CPU demo runs its model that way. Each mode runs in a fresh process with a fresh Inductor cache
directory, so compile times are honest, and prints: compile seconds (the compiled model's first calls),
the mode's whole time (a fresh Python importing torch included), choices benchmarked, and whether outputs
matched eager. Progress lines come from the worker as it goes.

Modes: ``default`` (plugin off), ``collect`` (every choice timed and logged), ``use`` (the artifact
trained from that log prunes autotuning), ``cache-record`` (the results cache records each winner) and
``cache`` (exact shapes answered from the results file, no benchmarking).

Offline: nothing is downloaded. The worker observes autotuning through Inductor's own public callbacks
(independent of the plugin), so what it reports is what Inductor did.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from ah_plugin.report import command_line, console

RESULT_PREFIX = "AH_DEMO_RESULT "
TRAINER_PACKAGES = ("numpy", "pandas", "sklearn")  # the demo trains a ranking (the tools extra)
PROGRESS_PREFIX = "AH_DEMO_PROGRESS "

# variables a mode sets; all removed from the parent's environment first so modes do not leak
_MODE_VARIABLE_PREFIXES = ("TORCHINDUCTOR_AUTOHEURISTIC_", "AH_PLUGIN_", "AH_TUNABLE_")



# --------------------------------------------------------------------------------------------------
# the workload (runs in the worker process)


def workload(quick: bool, cuda: bool) -> dict:
    """Layer widths, batch sizes, dtype, the op Inductor autotunes for them ("op") and the name the
    variables give ("request": mm, as the README)."""
    if cuda:
        dims = [1024, 2048, 512] if not quick else [1024, 2048]
        return {"dims": dims, "batches": [512] if quick else [256, 2048], "dtype": "bfloat16", "op": "mm",
                "request": "mm", "device": "cuda", "compile_mode": "max-autotune-no-cudagraphs"}
    dims = [64, 96, 48] if not quick else [64, 96]
    return {"dims": dims, "batches": [32], "dtype": "float32", "op": "packed_linear", "request": "mm",
            "device": "cpu", "compile_mode": "max-autotune"}


def progress(message: str) -> None:
    """A progress line from the worker (the driver prints it as it comes)."""
    print(PROGRESS_PREFIX + message, flush=True)


class Heartbeat:
    """Inside: a progress line every ``every`` seconds, so a long compile never looks like a hang."""

    def __init__(self, what: str, every: float = 15.0):
        self.what, self.every = what, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        start = time.perf_counter()
        while not self._stop.wait(self.every):
            progress(f"... still {self.what} ({time.perf_counter() - start:.0f} s)")

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def run_worker(spec: dict) -> dict:
    """Compile the model for each batch size; return compile time, autotunings, eager agreement."""
    started = time.perf_counter()
    import torch

    progress(f"torch imported in {time.perf_counter() - started:.0f} s")

    from ah_plugin.inductor import adapter  # the worker process needs the adapter: it is switched on anyway
    from ah_plugin.inductor import compile_tools

    adapter.install()  # idempotent; makes the observer below run after the plugin's pruning
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
            progress(f"compiling for a {rows}x{cols} input (max-autotune: lower, autotune, generate code) ...")
            before = len(records)
            start = time.perf_counter()
            with Heartbeat("compiling"):
                out = compiled(x)
                if device == "cuda":
                    torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            compile_s += seconds
            timed = sum(len(a["timed"]) for a in records[before:])
            progress(f"compiled in {seconds:.1f} s: {plural(len(records) - before, 'autotuning')}, "
                     f"{plural(timed, 'choice')} benchmarked")
            err = (out.float() - expected.float()).abs().max().item()
            max_err = max(max_err, err)
            matched &= bool(torch.allclose(out.float(), expected.float(), atol=tol, rtol=tol))
    stale = []
    try:
        from ah_plugin.use import ranking

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


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def run_mode(name: str, spec: dict, workdir: str, extra_env: dict, timeout: float = 600,
             on_progress=None) -> dict:
    """Run one mode in a fresh process with a fresh Inductor cache dir; return the worker's result.
    ``on_progress(line)`` gets the worker's progress lines as they come."""
    cache_dir = os.path.join(workdir, f"inductor-cache-{name}")
    os.makedirs(cache_dir, exist_ok=True)
    env = clean_environment(extra_env, cache_dir)
    start = time.perf_counter()
    result, stdout = None, []
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ah_plugin.demo", "--worker", json.dumps(spec)],
                                env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            for line in proc.stdout:
                if line.startswith(RESULT_PREFIX):
                    result = json.loads(line[len(RESULT_PREFIX):])
                elif line.startswith(PROGRESS_PREFIX) and on_progress is not None:
                    on_progress(line[len(PROGRESS_PREFIX):].rstrip("\n"))
                else:
                    stdout.append(line)
            proc.wait()
        finally:
            watchdog.cancel()
        err.seek(0)
        stderr = err.read()
    wall = time.perf_counter() - start
    if proc.returncode != 0 or result is None:
        raise RuntimeError(
            f"demo mode {name!r} failed (exit {proc.returncode}):\n{''.join(stdout)[-3000:]}\n{stderr[-6000:]}"
        )
    result.update(mode=name, wall_s=wall, env={k: v for k, v in extra_env.items()}, stderr=stderr)
    return result


def train_artifact(log_path: str, op: str, out_dir: str) -> str:
    """Train a heuristic from the collected log with our trainer, in its own process (the trainer uses
    scikit-learn, which ``ah_plugin`` never imports); return the artifact's path.

    The log's own feature columns suffice for a demo's handful of inputs (mm included); the mm trainer
    (``torchgen_ah.mm.train_decision_mm``) adds derived features for real datasets.
    """
    name = "".join(part.capitalize() for part in op.split("_")) + "RankingDemo"
    command = [sys.executable, "-m", "torchgen_ah.training.train_generic", log_path, "--heuristic-name", name,
               "--out", out_dir]
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
        "wall_s": result.get("wall_s", 0.0),
        "autotunings": len(autotunings),
        "benchmarked": sum(len(a["timed"]) for a in autotunings),
        "offered": sum(len(a["offered"]) for a in autotunings),
        "matched": result["matched"],
    }


TABLE_NOTE = ("compile s: the compiled model's first calls (lowering, autotuning, code generation); mode s: the "
              "whole mode, a fresh Python process importing torch and Inductor included; choices left: what "
              "the plugin left Inductor; benchmarked: what Inductor timed.")


def markdown(rows: list[dict]) -> str:
    lines = ["| mode | compile s | mode s | autotunings | choices left | choices benchmarked | matched eager |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['compile_s']:.1f} | {r['wall_s']:.1f} | {r['autotunings']} | "
                     f"{r['offered']} | {r['benchmarked']} | {'yes' if r['matched'] else 'NO'} |")
    return "\n".join(lines)


def explain(spec: dict) -> str:
    """Why the demo's model looks as it does on this machine."""
    if spec["device"] == "cuda":
        return ("The model's matmuls are mm, autotuned by Inductor over Triton templates and aten; "
                "COLLECT=mm and USE=mm act on them.")
    return ("On the CPU, Inductor autotunes a GEMM only when its weight is a constant: the demo turns on "
            "Inductor's freezing option (TORCHINDUCTOR_FREEZING=1 does it too) and runs its model under torch.no_grad(). Inductor then "
            "names the GEMM packed_linear (MKL against the C++ GEMM template), and COLLECT=mm / USE=mm cover "
            "it; a CPU mm in a training step is not autotuned at all (the plugin says so once).")


def probed_once(out) -> dict:
    """The CPU's vector ISA probed here, once, for every mode: each fresh Inductor cache would compile the
    probes again (seconds of g++ per mode on a small CPU). Returns the variable that tells the modes so,
    or nothing when the probes disagree with the CPU's flags (the modes then probe, as Inductor does)."""
    from ah_plugin.inductor import compile_tools

    if os.environ.get(compile_tools.VEC_ISA_OK):
        return {}
    if not compile_tools.vec_isa_trusted():
        return {}
    out(f"The CPU's vector instructions were probed once, here ({compile_tools.VEC_ISA_OK}=1 for the modes): a fresh "
        "Inductor cache would probe them again; every kernel is still compiled.")
    return {compile_tools.VEC_ISA_OK: "1"}


def run_demo(workdir: str, quick: bool = False, baseline: bool = False, out=print) -> dict:
    """Run every mode; print a markdown table of their summaries.

    Returns ``{"spec", "log_path", "artifact_path", "results": {mode: worker result}, "rows"}``.
    """
    import torch

    cuda = torch.cuda.is_available()
    spec = workload(quick, cuda)
    op, request = spec["op"], spec["request"]
    out(f"ah_plugin demo: {op} on {'CUDA' if cuda else 'CPU'}, layers {spec['dims']}, "
        f"batches {spec['batches']}, work dir {workdir}")
    out(explain(spec))
    out("Each mode is a fresh Python process with a fresh Inductor cache; importing torch takes a few seconds.")
    shared = {} if cuda else probed_once(out)
    log_path = os.path.join(workdir, f"{op}_log.txt")
    artifact_dir = os.path.join(workdir, "artifacts")
    use_env = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": request, "AH_PLUGIN_ARTIFACT_DIR": artifact_dir}
    rows, results = [], {}

    def mode(name, env):
        out(f"-- {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or '(no plugin variables)'}")
        result = results[name] = run_mode(name, spec, workdir, {**shared, **env},
                                          on_progress=lambda line: out(f"   {line}"))
        row = summarize(result)
        out(f"   {name}: {row['wall_s']:.1f} s in all, {row['compile_s']:.1f} s compiling; "
            f"{plural(row['benchmarked'], 'choice')} benchmarked in {plural(row['autotunings'], 'autotuning')}, "
            f"outputs {'match' if row['matched'] else 'DO NOT match'} eager")
        rows.append(row)
        return result

    cache = None if quick else cache_envs(workdir)
    if baseline:
        mode("default", {"AH_PLUGIN_DISABLE": "1"})
    mode("collect", {"TORCHINDUCTOR_AUTOHEURISTIC_COLLECT": request, "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH": log_path})
    out("-- train: python -m torchgen_ah.train_generic (a decision tree from the log; scikit-learn) ...")
    start = time.perf_counter()
    path = train_artifact(log_path, op, artifact_dir)
    out(f"   {os.path.basename(path)} in {time.perf_counter() - start:.1f} s")
    mode("use", use_env)
    if cache is not None:
        mode("cache-record", cache[0])  # Inductor autotunes; the cache records each winner
        mode("cache", cache[1])  # exact shapes answered from the results file
    out("")
    out(markdown(rows))
    out("")
    out(TABLE_NOTE)
    return {"spec": spec, "log_path": log_path, "artifact_path": path, "results": results, "rows": rows}


def main(argv=None) -> int:
    parser = command_line.parser("python -m ah_plugin.demo", __doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one layer shape, collect and use only")
    parser.add_argument("--baseline", action="store_true",
                        help="also run Inductor's default max-autotune (plugin off) first")
    parser.add_argument("--workdir", help="keep the log, the artifact, the results file and each mode's Inductor "
                        "cache here (default: a new temporary folder, kept without the caches)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = run_worker(json.loads(args.worker))
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    missing = [name for name in TRAINER_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:  # found before the first mode, not after it
        return command_line.fail("demo", ModuleNotFoundError(console.missing_tools_package(missing[0])))
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="ah_plugin_demo_")
    started = time.perf_counter()
    rows = run_demo(workdir, args.quick, args.baseline)["rows"]
    if not args.workdir:
        for name in os.listdir(workdir):
            if name.startswith("inductor-cache-"):
                shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
    print(f"The demo took {time.perf_counter() - started:.0f} s. Its log, artifact and results file are kept in "
          f"{workdir}" + ("" if args.workdir else " (each mode's Inductor cache removed; --workdir DIR keeps them)"))
    return 0 if all(r["matched"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
