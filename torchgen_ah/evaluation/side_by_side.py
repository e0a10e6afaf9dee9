"""The modes' generated code for one GEMM, timed side by side in one process.

``compile_cost`` compiles each mode in a fresh process with fresh caches and times the compiled function
there. Two processes running the very same kernels then replay a few percent apart (the same cuBLAS call
measured 0.989-1.042x of itself across processes on an H200), which is as large as the fast-mode bar
itself. This step takes the modules each mode's process generated (saved by ``compile_cost``), loads them
all into one fresh process and times them in rounds, modes interleaved and their order rotated each round.
The report pairs the rounds (``kernel_times.side_rows``) and states how far apart two modes that generated
the very same code still measure (on the H200: 0.98-1.02x): a difference beyond that is the kernels'.

Each module is Inductor's own output code: ``get_args()`` makes inputs of the compiled graph's sizes and
strides and ``call(args)`` runs the graph (the harness Inductor writes into every module). Every mode of a
shape runs on the same input tensors where its graph takes the same ones: on an H200, the same cuBLAS call
on inputs of its own measured up to 2.2% apart from itself even interleaved in one process (1.6% on shared
inputs). On a GPU each
call is timed by CUDA-graph replay (``ah_plugin.replay_timing``), as in the mode's own process; on a CPU by
wall clock, so the whole path runs in CI. The modes' Triton caches are offered to the process (linked into
one folder, each kernel under its own key), so it recompiles no kernel a mode already built, and so are the
launch configs Inductor tuned for the modes' other kernels (``*.best_config`` beside each kernel's source),
so a pointwise or reduction kernel runs with the config its mode chose instead of being tuned again.

Run by ``compile_cost`` after the modes (``--side-by-side-rounds``); writes ``side_by_side.jsonl`` beside
``results.jsonl``: one line per shape, mode and process with every round's time and their median. A module
that cannot be loaded or run, or a shape whose timing fails, is named in ``side_by_side.log`` and left out;
the other shapes go on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LINES = "side_by_side.jsonl"
DEFAULT_ROUNDS = 6  # a multiple of 2 and 3: with the rotation, each of two or three modes runs first as often
METHOD_REPLAY = "cudagraph_replay"
METHOD_CPU_WALL = "cpu_wall"


class GeneratedModuleError(RuntimeError):
    """A saved module that cannot be loaded or run (names the file)."""


def load_generated_module(path: str):
    """Import one of Inductor's generated modules from ``path``; it must have Inductor's harness
    (``call`` and ``get_args``)."""
    name = "ah_side_by_side_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise GeneratedModuleError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise GeneratedModuleError(f"{path}: cannot be loaded: {type(exc).__name__}: {exc}") from exc
    for attr in ("call", "get_args"):
        if not callable(getattr(module, attr, None)):
            raise GeneratedModuleError(f"{path}: no {attr}() (not a module Inductor generated with its harness)")
    return module


def signature(args) -> list:
    """What a graph's inputs must agree on to be shared: each one's type, and a tensor's size, stride, dtype
    and device."""
    out = []
    for a in args:
        if hasattr(a, "stride") and hasattr(a, "dtype"):
            out.append((tuple(a.shape), tuple(a.stride()), str(a.dtype), str(a.device)))
        else:
            out.append((type(a).__name__, a if isinstance(a, (int, float, bool)) else None))
    return out


def runner(paths: list[str], shared: list | None = None):
    """(a no-argument callable running the generated modules of one compiled call in order, the inputs it
    runs on). Inputs come from each module's ``get_args()``, or are ``shared[i]`` where that has the same
    signature: two modes then read the very same tensors, and identical code times alike instead of
    differing by where its inputs were placed in memory. ``call`` empties the list it is given, so each call
    gets a copy."""
    modules = [load_generated_module(p) for p in paths]
    inputs = []
    for i, module in enumerate(modules):
        own = module.get_args()
        other = shared[i] if shared is not None and i < len(shared) else None
        inputs.append(other if other is not None and signature(other) == signature(own) else own)

    def run():
        for module, args in zip(modules, inputs):
            module.call(list(args))
    return run, inputs


def cpu_time_ms(fn, calls: int = 20, repeats: int = 5) -> float:
    """Wall milliseconds per call of ``fn`` on a CPU: the median over ``repeats`` timings of ``calls`` calls."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) * 1e3 / calls)
    return statistics.median(times)


def interleaved(fns: dict, rounds: int, timer) -> dict:
    """{label: [ms of each round]}: every callable of ``fns`` timed once per round, the order rotated by one
    each round so that none always runs first or after the same neighbour."""
    labels = list(fns)
    times: dict = {label: [] for label in labels}
    for r in range(rounds):
        shift = r % len(labels) if labels else 0
        for label in labels[shift:] + labels[:shift]:
            times[label].append(timer(fns[label]))
    return times


def plan(results: list[dict]) -> dict:
    """{shape: [(mode, proc, op, [module paths])]} of the results lines that saved their generated code
    (the first autotuning of each process; ``replay_all``'s second one is a repetition, not a mode), for the
    shapes with at least two such lines: one alone has nothing to be compared with."""
    out: dict = {}
    for r in results:
        files = r.get("code_files")
        if not files or r.get("rep", 0):
            continue
        out.setdefault(r["shape"], []).append((r["mode"], r.get("proc", 0), r["op"], files))
    return {shape: entries for shape, entries in out.items() if len(entries) > 1}


def _mode_caches(out_dir: str, kind: str):
    """The ``caches_<mode>/<kind>`` folders under ``out_dir`` (every repetition's), in the order of their paths."""
    for root, dirs, _ in os.walk(out_dir):
        dirs.sort()
        if os.path.basename(root) == kind and os.path.basename(os.path.dirname(root)).startswith("caches_"):
            dirs[:] = []
            yield os.path.abspath(root)


def link_triton_caches(out_dir: str, target: str) -> int:
    """Link every kernel folder of the modes' Triton caches under ``out_dir`` (``**/caches_*/triton/KEY``)
    into ``target``; a key already there is the same kernel and is skipped. Returns the number linked."""
    os.makedirs(target, exist_ok=True)
    linked = 0
    for cache in _mode_caches(out_dir, "triton"):
        for key in sorted(os.listdir(cache)):
            dest = os.path.join(target, key)
            if os.path.isdir(os.path.join(cache, key)) and not os.path.lexists(dest):
                os.symlink(os.path.join(cache, key), dest)
                linked += 1
    return linked


def link_tuned_configs(out_dir: str, target: str) -> int:
    """Link the launch configs the modes' processes tuned (``**/caches_*/inductor/**.best_config``) into
    ``target`` at the same relative paths: Inductor looks for a kernel's config beside its source, whose path
    below the cache folder is a hash of the source. Of two modes that tuned one kernel, the first by path
    (``caches_default`` before ``caches_fast``) gives its config. Returns the number linked."""
    linked = 0
    for cache in _mode_caches(out_dir, "inductor"):
        for root, _, files in os.walk(cache):
            for name in files:
                if not name.endswith(".best_config"):
                    continue
                dest = os.path.join(target, os.path.relpath(os.path.join(root, name), cache))
                if not os.path.lexists(dest):
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    os.symlink(os.path.join(root, name), dest)
                    linked += 1
    return linked


def clear(out_dir: str) -> None:
    """Remove an earlier run's side-by-side lines and saved modules from ``out_dir``."""
    lines = os.path.join(out_dir, LINES)
    if os.path.exists(lines):
        os.remove(lines)
    shutil.rmtree(os.path.join(out_dir, "code"), ignore_errors=True)


def worker(spec: dict) -> None:
    """In the fresh process: per shape, load every mode's modules, time them interleaved, append the lines."""
    import torch  # lazy: the parent never imports torch for this

    from ah_plugin.inductor.compile_tools import replay_time_ms

    cuda = spec["device"] == "cuda"
    timer = replay_time_ms if cuda else cpu_time_ms
    method = METHOD_REPLAY if cuda else METHOD_CPU_WALL
    base = spec["out_dir"]
    for shape, entries in spec["plan"].items():
        fns, ops, shared = {}, {}, None
        for mode, proc, op, files in entries:
            label = f"{mode}#{proc}"
            try:
                fns[label], inputs = runner([os.path.join(base, f) for f in files], shared)
                shared = shared or inputs  # the first mode's inputs, for every mode whose graph takes the same
                ops[label] = op
            except Exception as exc:  # one module that cannot be made ready must not lose the others
                print(f"{shape}: {label} left out: {type(exc).__name__}: {exc}", flush=True)
        if len(fns) < 2:
            continue
        try:
            with torch.no_grad():
                times = interleaved(fns, spec["rounds"], timer)
        except Exception as exc:  # a call or a capture that fails: this shape is left out, the next one runs
            print(f"{shape}: not timed: {type(exc).__name__}: {exc}", flush=True)
            continue
        with open(os.path.join(base, LINES), "a", encoding="utf-8") as f:
            for label, ms in times.items():
                mode, proc = label.rsplit("#", 1)
                f.write(json.dumps({"mode": mode, "proc": int(proc), "op": ops[label], "shape": shape,
                                    "ms": statistics.median(ms), "rounds": ms, "method": method}) + "\n")
        del fns
        if cuda:
            torch.cuda.empty_cache()


def run(out_dir: str, results: list[dict], device: str, rounds: int, timeout: float, env=None) -> str:
    """Time the saved modules of ``results`` side by side in one fresh process; returns an outcome for the
    report's status line ("ok", "skipped (...)", "exit N (see side_by_side.log)")."""
    from torchgen_ah.evaluation.eval_worker import with_package_on_path

    shapes = plan(results)
    if not shapes:
        return "skipped (no shape compiled with saved code by two processes)"
    lines = os.path.join(out_dir, LINES)
    if os.path.exists(lines):
        os.remove(lines)
    work = tempfile.mkdtemp(prefix="side_by_side_", dir=out_dir)
    env = dict(os.environ if env is None else env)
    env.update(AH_PLUGIN_DISABLE="1", TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"),
               TRITON_CACHE_DIR=os.path.join(work, "triton"))
    link_triton_caches(out_dir, env["TRITON_CACHE_DIR"])
    link_tuned_configs(out_dir, env["TORCHINDUCTOR_CACHE_DIR"])
    with_package_on_path(env)
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump({"plan": shapes, "device": device, "rounds": rounds, "out_dir": os.path.abspath(out_dir)}, f)
    try:
        with open(os.path.join(out_dir, "side_by_side.log"), "w", encoding="utf-8") as log:
            try:
                rc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.side_by_side", spec_path], env=env,
                                    stdout=log, stderr=subprocess.STDOUT, timeout=max(timeout, 1)).returncode
            except subprocess.TimeoutExpired:
                rc = 124
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return "ok" if rc == 0 else f"exit {rc} (see side_by_side.log)"


def read_lines(out_dir: str, name: str = LINES) -> list[dict]:
    """The side-by-side lines of a run folder (file ``name``), as ``kernel_times`` reads results lines
    (``replay_ms``); none when the file is not there."""
    path = os.path.join(out_dir, name)
    if not os.path.exists(path):
        return []
    from torchgen_ah.evaluation.json_lines import read_json_lines

    return [{**line, "replay_ms": line["ms"]}
            for line in read_json_lines(path, ("mode", "shape", "ms"), "a side-by-side line")]


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m torchgen_ah.evaluation.side_by_side SPEC.json (written by compile_cost)",
              file=sys.stderr)
        return 2
    with open(args[0], encoding="utf-8") as f:
        worker(json.load(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
