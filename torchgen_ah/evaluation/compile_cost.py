"""Compile cost per autotuning mode: real ``torch.compile`` in a fresh process with fresh caches per mode.

    python -m torchgen_ah.compile_cost SHAPES_FILE --out DIR [--shapes 3] [--modes ...] [--max-minutes 2]

Each mode runs in its own process with its own empty Inductor and Triton cache folders (so no mode reuses
another's compiled kernels). The process first compiles an unrelated tiny function with max-autotune
off, paying the one-time costs (imports, Dynamo and Inductor start-up), then compiles each shape's GEMM
and times its first call (compile + autotune + one run). Autotune seconds per mm = that time minus the
same shape's time with max-autotune off.

Modes (environment of the process; the plugin reads it at ``import torch``):

- ``off``: ``torch.compile`` without max-autotune; plugin off.
- ``default``: ``mode="max-autotune-no-cudagraphs"``; plugin off, torch's AutoHeuristic off.
- ``aten_only``: max-autotune with aten as the only GEMM backend; plugin off.
- ``builtin_ah``: max-autotune with torch's own ``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm``; plugin off.
- ``fast``: max-autotune, plugin in use mode (``OURS_USE``) with its defaults: fast mode.
- ``quality``: max-autotune, plugin in use mode, ``AH_PLUGIN_TOP_K=quality``: the ranking's top templates
  (persistent TMA offered) and aten, timed by replay.
- ``plugin_k10`` / ``plugin_adaptive`` / ``plugin_k1``: max-autotune, plugin in use mode (``OURS_USE``),
  ``AH_PLUGIN_TOP_K``.
- ``plugin_top1``: the ranking's first choice alone (no aten kept, ``AH_PLUGIN_MIN_CHOICES=1``): Inductor
  benchmarks nothing and compiles that one kernel once, the floor of what a ranking can cost.
- ``cache``: max-autotune, results cache enabled and filled beforehand by a ``cache_record`` process
  (tuning on) over the same shapes; the measured process only reads it.
- ``replay_all``: the plugin's collector on mm over default's space: every candidate timed by CUDA-graph
  replay, twice per shape (the reference the timing methods' picks are graded on, ``kernel_times``).

The modes' processes also save the modules they generated (``OUT/code/``); after the modes, one
fresh process loads every mode's modules of each shape and times them side by side, modes interleaved
(``side_by_side``): two processes running the same cuBLAS call replay a few percent apart, as much as the
fast-mode bar; this second table takes the processes out of the comparison, and states the noise left.

Writes ``compile_cost.json`` ({op: {"compile_seconds": {mode: mean}, "autotune_seconds": {mode: mean}}}, the
input of ``torchgen_ah.evaluate --compile-cost``), ``compile_cost.csv`` (per shape) and a markdown table; on
a GPU the table also holds each mode's compiled kernel timed by CUDA-graph replay.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import time

from ah_plugin.report import command_line
from torchgen_ah.evaluation import kernel_times, side_by_side
from torchgen_ah.evaluation.eval_worker import make_case, shape_label, with_package_on_path
from torchgen_ah.evaluation.policies import mode_name
from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section
from torchgen_ah.evaluation.evaluate import DEFAULT_SHAPES, ShapesError, read_shapes

MAX_AUTOTUNE = "max-autotune-no-cudagraphs"
# Measured in this order so that a time budget keeps the modes the evaluation's bars need.
ALL_MODES = ("off", "default", "fast", "quality", "plugin_adaptive", "plugin_k10", "cache", "builtin_ah",
             "plugin_k1", "plugin_top1", "replay_all", "aten_only", "fast_tune_all", "quality_padded",
             "off_frozen", "quality_frozen", "fast_backed")
FROZEN = "_frozen"
# off_frozen, quality_frozen: the mode with Inductor's freezing on (TORCHINDUCTOR_FREEZING=1): weights become
# constants, so Inductor concatenates projections that share an input (horizontal fusion) and folds constants;
# a user's opt-in for inference (later weight updates are not seen), measured to price horizontal fusion.
# quality_padded: quality mode with its padded candidate offered (AH_PLUGIN_PADDED_CHOICE=auto), to measure it.
# aten_only: max-autotune with aten as the only GEMM backend, plugin off: what max-autotune costs besides
# GEMM selection (pointwise and reduction config tuning), to tell that apart from the plugin's cost.
# fast_tune_all: fast mode with max-autotune's tuning of the other kernels kept (AH_PLUGIN_NON_GEMM=tune).
# fast_backed: fast mode keeping aten alone, on a GPU, where its artifact's data do not back the template
# (AH_PLUGIN_TIME_UNBACKED=off; fast mode times the template against aten there), to price that switch.
# replay_all: every default candidate timed by CUDA-graph replay, twice per shape (the plugin's collector
# path with the default space): the replay-fastest choice that the per-call pick is compared with.
REPLAY_REPS = 2
# the environment of a process that switches the plugin on through its Python API, scope by scope (the zoo's
# steps judged in one process): no plugin variable set, none disabling it
API_ENVIRONMENT = "plugin_api"
# modes whose generated code is not timed side by side: a results file's filling run and the collector's
NOT_SIDE_BY_SIDE = ("cache_record", "replay_all")
TIMED_OUT = 124  # a mode's exit code when its process ran past its time limit (as coreutils' timeout says it)

# Our modes act on mm (which in use mode covers addmm, bmm and baddbmm: linear layers with a bias are
# ranked with the mm artifact), on convolution (a ViT's patch embedding; fast mode keeps aten where no
# artifact ranks an op) and on FlexAttention's kernels (ranked before code generation; off's config where no
# artifact covers the device); torch's built-in AutoHeuristic acts on mm only.
OURS_USE = "mm,convolution,flex_attention,flex_decoding,flex_attention_backward"
_PLUGIN_VARS = ("TORCHINDUCTOR_AUTOHEURISTIC_COLLECT", "TORCHINDUCTOR_AUTOHEURISTIC_USE")
_KEPT_PLUGIN_VARS = ("AH_PLUGIN_VERBOSE",)  # says more, changes nothing a mode measures


def _caller_plugin_var(name: str) -> bool:
    """A variable of the caller's that would change what a mode measures (each mode sets its own)."""
    return name in _PLUGIN_VARS or (name.startswith("AH_PLUGIN_") and name not in _KEPT_PLUGIN_VARS)


def mode_environment(mode: str, work_dir: str, base_env=None, caches: str | None = None) -> tuple[dict, str | None]:
    """(environment, torch.compile mode) for one mode, with fresh cache folders under ``work_dir``
    (``caches``: their folder's name, default ``caches_<mode>``)."""
    mode = mode_name(mode)
    if mode.endswith(FROZEN):  # the base mode with Inductor's freezing (constant weights; inference only)
        env, compile_mode = mode_environment(mode[:-len(FROZEN)], work_dir, base_env, caches or f"caches_{mode}")
        env["TORCHINDUCTOR_FREEZING"] = "1"
        return env, compile_mode
    env = {k: v for k, v in (os.environ if base_env is None else base_env).items()
           if not _caller_plugin_var(k) and not k.startswith("AH_TUNABLE_")}
    caches = os.path.join(work_dir, caches or f"caches_{mode}")
    shutil.rmtree(caches, ignore_errors=True)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
    cache_file = os.path.join(work_dir, "tunable_results.csv")
    compile_mode: str | None = MAX_AUTOTUNE
    if mode == API_ENVIRONMENT:
        pass  # no plugin variable: the process switches the plugin on through its API, scope by scope
    elif mode == "off":
        env["AH_PLUGIN_DISABLE"] = "1"
        compile_mode = None
    elif mode == "default":
        env["AH_PLUGIN_DISABLE"] = "1"
    elif mode == "builtin_ah":
        env["AH_PLUGIN_DISABLE"] = "1"
        env["TORCHINDUCTOR_AUTOHEURISTIC_USE"] = "mm"
    elif mode == "aten_only":
        env["AH_PLUGIN_DISABLE"] = "1"
        env["TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS"] = "ATEN"
    elif mode == "fast":
        env["TORCHINDUCTOR_AUTOHEURISTIC_USE"] = OURS_USE  # fast mode is the plugin's default
    elif mode in ("quality", "quality_padded"):
        env.update(TORCHINDUCTOR_AUTOHEURISTIC_USE=OURS_USE, AH_PLUGIN_TOP_K="quality")
        env["AH_PLUGIN_PADDED_CHOICE"] = "auto" if mode == "quality_padded" else "off"
    elif mode == "fast_tune_all":
        env.update(TORCHINDUCTOR_AUTOHEURISTIC_USE=OURS_USE, AH_PLUGIN_NON_GEMM="tune")
    elif mode == "fast_backed":
        env.update(TORCHINDUCTOR_AUTOHEURISTIC_USE=OURS_USE, AH_PLUGIN_TIME_UNBACKED="off")
    elif mode == "replay_all":
        env.update(TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm", AH_PLUGIN_SEARCH_SPACE="default",
                   TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=os.path.join(work_dir, "replay_all_log.txt"))
    elif mode == "plugin_top1":
        env.update(TORCHINDUCTOR_AUTOHEURISTIC_USE=OURS_USE, AH_PLUGIN_TOP_K="1", AH_PLUGIN_KEEP_ATEN="0",
                   AH_PLUGIN_MIN_CHOICES="1")
    elif mode.startswith("plugin_"):
        env["TORCHINDUCTOR_AUTOHEURISTIC_USE"] = OURS_USE
        env["AH_PLUGIN_TOP_K"] = mode[len("plugin_"):].lstrip("k") if mode != "plugin_adaptive" else "adaptive"
    elif mode in ("cache", "cache_record"):
        env["AH_TUNABLE_ENABLED"] = "1"
        env["AH_TUNABLE_FILENAME"] = cache_file
        env["AH_TUNABLE_TUNING"] = "1" if mode == "cache_record" else "0"
    else:
        raise ValueError(f"unknown mode {mode!r}; known: {ALL_MODES}")
    return env, compile_mode


def _warm_up(torch, device: str) -> None:
    """Pay Dynamo/Inductor start-up once, outside any measurement (max-autotune off)."""
    x = torch.randn(8, 8, device=device)
    torch.compile(lambda a: (a * 2).sum())(x)
    torch.compiler.reset()


def worker(spec: dict) -> None:
    """Inside the mode's process: compile each shape once (``replay_all``: ``REPLAY_REPS`` times), append one
    JSON line per shape: first-call seconds, on a GPU the compiled function's time by CUDA-graph replay,
    every candidate's time as the autotuner measured it (per autotuning), and the generated code's
    fingerprint (``generated_code``: the same kernels in two processes give the same one) and the result's
    error against eager PyTorch's (``result_check``)."""
    import torch  # lazy: only the mode's own process imports torch; the parent's modules stay cheap

    import ah_plugin
    from ah_plugin.inductor import compile_tools  # this process only: the parent stays free of Inductor
    from ah_plugin.inductor.generated_code_capture import first_call_with_code
    from ah_plugin.replay_timing import ReplayTimingError
    from torchgen_ah.evaluation.generated_code import code_fingerprint, save_modules
    from torchgen_ah.evaluation.result_check import checked_error

    ah_plugin.require_active_from_environment()  # the mode's plugin settings, entry point or not
    device = spec["device"]
    if any(row["op"] == "packed_linear" for row in spec["shapes"]):
        compile_tools.freeze_constant_weights()
    if spec["mode"] == "replay_all":
        compile_tools.without_compile_caches()  # each repetition autotunes afresh
    measured: list = []  # {choice id: ms} of each autotuning, as Inductor's autotuner saw them
    compile_tools.on_timings(lambda name, timings: measured.append(timings))
    _warm_up(torch, device)

    def first_call(row, stem: str | None = None) -> dict:
        torch.compiler.reset()
        fn, args = make_case(torch, row, device)
        compiled = torch.compile(fn, mode=spec["compile_mode"], dynamic=False)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            result, codes = first_call_with_code(compiled, args)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            error = checked_error(result, lambda: fn(*args))
            del result
            replay_ms = None
            if device == "cuda":
                try:
                    replay_ms = compile_tools.replay_time_ms(lambda: compiled(*args))
                except ReplayTimingError as exc:
                    print(f"no replay time for {shape_label(row)}: {exc}", flush=True)
        saved = {"code_files": save_modules(codes, spec["code_base"], stem)} if stem and codes else {}
        return {"seconds": seconds, "replay_ms": replay_ms, "code": code_fingerprint(codes), "result_error": error,
                **saved}

    reps = REPLAY_REPS if spec["mode"] == "replay_all" else 1
    save = spec.get("code_base") and spec["mode"] not in NOT_SIDE_BY_SIDE
    for index, row in enumerate(spec["shapes"]):
        for rep in range(reps):
            measured.clear()
            stem = f"code/{spec['mode']}_p{spec.get('proc', 0)}_{index:03d}" if save and not rep else None
            result = first_call(row, stem)
            with open(spec["result_path"], "a", encoding="utf-8") as f:
                f.write(json.dumps({"mode": spec["mode"], "op": row["op"], "shape": shape_label(row), "rep": rep,
                                    "proc": spec.get("proc", 0),
                                    **result, "timings": list(measured)}) + "\n")
    if spec.get("profile_shape"):
        write_profile(lambda: first_call(spec["profile_shape"])["seconds"], spec["profile_path"])


def profile_text(source, cumulative: int = 45, own: int = 25, header: str = "") -> str:
    """The top functions by cumulative and by own time of a cProfile profiler or dump file, as text."""
    text = io.StringIO()
    text.write(header)
    stats = pstats.Stats(source, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(cumulative)
    stats.sort_stats("tottime").print_stats(own)
    return text.getvalue()


def write_profile(call, path: str) -> None:
    """Where a mode's compile time goes: ``call`` under cProfile (main thread), the top functions by
    cumulative and by own time. Profiled runs are slower; they are never part of the measured seconds."""
    profiler = cProfile.Profile()
    seconds = profiler.runcall(call)
    with open(path, "w", encoding="utf-8") as f:
        f.write(profile_text(profiler, header=f"first call under cProfile: {seconds:.2f} s\n"))


def run_mode(mode: str, shapes, device: str, work_dir: str, timeout: float, module: str, extra=None,
             env_mode: str | None = None) -> int:
    """Run ``python -m module --worker SPEC`` for one mode in a fresh process; returns its exit code.
    ``env_mode``: the mode whose environment the process gets (default ``mode``), for a control that runs
    another mode again under its own name (its own log, spec and cache folders)."""
    env, compile_mode = mode_environment(env_mode or mode, work_dir, caches=f"caches_{mode}")
    with_package_on_path(env)
    spec = {"mode": mode, "compile_mode": compile_mode, "device": device, "shapes": list(shapes),
            "result_path": os.path.join(work_dir, "results.jsonl"), **(extra or {})}
    spec_path = os.path.join(work_dir, f"spec_{mode}.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    with open(os.path.join(work_dir, f"{mode}.log"), "w", encoding="utf-8") as log:
        try:
            return subprocess.run([sys.executable, "-m", module, "--worker", spec_path], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=max(timeout, 1)).returncode
        except subprocess.TimeoutExpired:
            return TIMED_OUT


def run_worker(spec_path: str, worker) -> int:
    """The ``--worker SPEC`` side of a mode's process: ``worker`` on the JSON spec the parent wrote."""
    with open(spec_path, encoding="utf-8") as f:
        worker(json.load(f))
    return 0


def add_combine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--combine FILES`` and ``--note TEXT``: report earlier runs' results files instead of running."""
    parser.add_argument("--combine", default=None, metavar="FILES",
                        help="run nothing: report the results.jsonl files of earlier runs (comma-separated) as one "
                             "report, e.g. runs of one session split over several device calls")
    parser.add_argument("--note", default=None, metavar="TEXT",
                        help="with --combine: a paragraph under the command saying where the rows came from (the "
                             "commands of the runs combined)")


def parse_or_work(parser: argparse.ArgumentParser, argv, worker):
    """The command line's arguments; in a mode's own process (the hidden ``--worker SPEC``) run ``worker``
    on the spec instead and exit."""
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        sys.exit(run_worker(args.worker, worker))
    return args


def pick_device(device: str | None) -> str:
    """The ``--device`` argument, or cuda when this machine has one, else cpu."""
    if device is not None:
        return device
    import torch  # lazy: only when no --device is given

    return "cuda" if torch.cuda.is_available() else "cpu"


def fresh_results_path(out_dir: str) -> str:
    """``out_dir/results.jsonl``, emptied: the worker processes append one JSON line per measurement."""
    os.makedirs(out_dir, exist_ok=True)
    result_path = os.path.join(out_dir, "results.jsonl")
    if os.path.exists(result_path):
        os.remove(result_path)
    return result_path


def run_steps(modes, deadline: float, launch, label: str = "", process_limit: float | None = None) -> dict[str, str]:
    """Run each mode's process while time is left (``cache``: a ``cache_record`` run fills the results file
    first). ``launch(step, seconds_left)`` returns the exit code (124: the process was stopped at its time
    limit, the smaller of the time left and ``process_limit``). Returns {label + step: outcome}."""
    status = {}
    for mode in modes:
        for step in (["cache_record", "cache"] if mode == "cache" else [mode]):
            left = deadline - time.time()
            if left <= 5:
                status[label + step] = "skipped (time budget)"
                continue
            rc = launch(step, left)
            status[label + step] = "ok" if rc == 0 else _outcome(rc, left, process_limit, f"{label}{step}.log")
    return status


def _outcome(rc: int, left: float, process_limit: float | None, log: str) -> str:
    """What a failed mode's exit code means, in the words of the option that set its limit."""
    if rc != TIMED_OUT:
        return f"exit {rc} (see {log})"
    if process_limit is not None and process_limit <= left:
        return f"stopped at the per-process limit, {process_limit:.0f} s (--run-timeout; see {log})"
    return f"stopped at {left:.0f} s, the time left of the run's budget (--max-minutes; see {log})"


def read_results(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def summarize_cost(results: list[dict]) -> dict:
    """{op: {"compile_seconds": {mode: mean}, "autotune_seconds": {mode: mean over shapes of
    (mode seconds - off seconds)}}} over the shapes every reported mode finished (a shape's seconds: the
    mean over the mode's processes)."""
    out: dict = {}
    by_op: dict = {}
    for r in results:
        if r["mode"] in ("cache_record", "replay_all") or r.get("rep", 0):
            continue
        by_op.setdefault(r["op"], {}).setdefault(r["mode"], {}).setdefault(r["shape"], []).append(r["seconds"])
    for op, modes in by_op.items():
        modes = {mode: {shape: sum(v) / len(v) for shape, v in per_shape.items()} for mode, per_shape in modes.items()}
        compile_s, autotune_s = {}, {}
        off = modes.get("off", {})
        for mode, per_shape in modes.items():
            compile_s[mode] = sum(per_shape.values()) / len(per_shape)
            shared = [s for s in per_shape if s in off]
            if shared:
                autotune_s[mode] = sum(max(per_shape[s] - off[s], 0.0) for s in shared) / len(shared)
        out[op] = {"compile_seconds": compile_s, "autotune_seconds": autotune_s}
    return out


def markdown(summary: dict, command: str) -> str:
    lines = [f"Compile cost (`{command}`): seconds per mm, fresh process and caches per mode", ""]
    for op, cost in summary.items():
        default = cost["autotune_seconds"].get("default")
        lines += [f"{op}:", "", "| mode | compile s/mm | autotune s/mm | autotune vs default |",
                  "| --- | --- | --- | --- |"]
        for mode, seconds in cost["compile_seconds"].items():
            auto = cost["autotune_seconds"].get(mode)
            share = f"{auto / default:.0%}" if auto is not None and default else "n/a"
            lines.append(f"| {mode} | {seconds:.2f} | {'n/a' if auto is None else f'{auto:.2f}'} | {share} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = command_line.parser("python -m torchgen_ah.compile_cost", __doc__.split("\n")[0])
    parser.add_argument("shapes_file", nargs="?", default=DEFAULT_SHAPES,
                        help="CSV or JSON shapes file (default: the evaluation's shapes, torchgen_ah/data/eval_shapes.csv)")
    parser.add_argument("--out", default="compile_cost_out", help="output folder (logs, tables, report)")
    parser.add_argument("--shapes", type=int, default=3, help="first N shapes of the file")
    parser.add_argument("--modes", default=",".join(ALL_MODES), help="comma-separated modes to compile in")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available, else cpu)")
    parser.add_argument("--reps", type=int, default=1,
                        help="fresh processes per mode; repetitions are the outer loop, modes interleaved in each "
                             "(kernel times are the median over them)")
    parser.add_argument("--max-minutes", type=float, default=2.5,
                        help="time budget; modes not started by then are skipped and reported")
    parser.add_argument("--profile", action="store_true",
                        help="after the measured shapes, compile the file's next shape under cProfile and write "
                             "OUT/<mode>.profile.txt (not part of the measurement)")
    parser.add_argument("--results", default=None,
                        help="also write the report as the compile_cost section of this markdown file "
                             "(e.g. benchmarks/RESULTS.md)")
    parser.add_argument("--side-by-side-rounds", type=int, default=side_by_side.DEFAULT_ROUNDS,
                        help="after the modes, time every mode's generated code for each shape in one fresh process, "
                             "this many interleaved rounds (up to --side-by-side-minutes more; a multiple of the "
                             "number of modes runs each first equally often); 0: skip")
    parser.add_argument("--side-by-side-minutes", type=float, default=2.0,
                        help="time the side-by-side step may take after the modes")
    add_combine_arguments(parser)
    args = parse_or_work(parser, argv, worker)
    if args.combine:
        return combine(args.combine.split(","), args.out, args.results, args.note)
    try:
        all_shapes = read_shapes(args.shapes_file)
        shapes = all_shapes[: args.shapes]
    except (OSError, ShapesError) as exc:
        return command_line.fail("compile_cost", exc, 2)
    device = pick_device(args.device)
    modes = [mode_name(m.strip()) for m in args.modes.split(",") if m.strip()]
    for mode in modes:
        if mode not in ALL_MODES:
            return command_line.fail("compile_cost", ValueError(f"--modes: unknown mode {mode!r}; known: "
                                                                f"{', '.join(ALL_MODES)}"), 2)
    result_path = fresh_results_path(args.out)
    side_by_side.clear(args.out)
    deadline = time.time() + args.max_minutes * 60
    extra = None
    if args.profile and len(all_shapes) > args.shapes:
        extra = {"profile_shape": all_shapes[args.shapes]}
    if args.reps < 1:
        return command_line.fail("compile_cost", ValueError(f"--reps {args.reps}: must be at least 1"), 2)
    def spec_extra(step: str, proc: int) -> dict:
        out = {"proc": proc, "result_path": result_path}  # every process appends to the one results file
        if args.side_by_side_rounds > 0:
            out["code_base"] = os.path.abspath(args.out)  # the generated modules, for side_by_side
        if extra and proc == 0:  # the profile: once, in the first repetition
            out.update(extra, profile_path=os.path.join(args.out, f"{step}.profile.txt"))
        return out

    status = {}
    for proc in range(args.reps):
        # a repetition's logs, specs, caches and results-cache file in a folder of its own (proc1/, ...)
        label = f"proc{proc}/" if proc else ""
        work = os.path.join(args.out, label) if proc else args.out
        os.makedirs(work, exist_ok=True)
        status.update(run_steps(modes, deadline, lambda step, left, proc=proc, work=work: run_mode(
            step, shapes, device, work, left, "torchgen_ah.evaluation.compile_cost", spec_extra(step, proc)),
            label=label))
    results = read_results(result_path)
    side = []
    if args.side_by_side_rounds > 0 and results:
        status["side_by_side"], side = side_by_side_step(args.out, results, device, args.side_by_side_rounds,
                                                         args.side_by_side_minutes * 60)
    command = "python -m torchgen_ah.compile_cost " + " ".join(argv if argv is not None else sys.argv[1:])
    report(results, command, args.out, args.results, status, side=side)
    return 0 if results else 1


def side_by_side_step(out: str, results: list[dict], device: str, rounds: int, seconds: float) -> tuple[str, list]:
    """(outcome for the report's status line, the side-by-side lines): the step never costs the report the
    modes' results, whatever fails in it."""
    try:
        outcome = side_by_side.run(out, results, device, rounds, seconds)
        return outcome, side_by_side.read_lines(out)
    except Exception as exc:  # a file system error, a line cut off by the timeout: reported, the rest stands
        return f"failed ({type(exc).__name__}: {exc})", []


def report(results: list[dict], command: str, out: str, results_md: str | None, status: dict | None = None,
           note: str | None = None, side: list[dict] | None = None) -> None:
    """compile_cost.json, compile_cost.csv and compile_cost.md under ``out``; the section of ``results_md``
    (``side``: the side-by-side lines, their table after the per-process one)."""
    summary = summarize_cost(results)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compile_cost.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(out, "compile_cost.csv"), "w", encoding="utf-8") as f:
        f.write("mode,op,shape,proc,rep,seconds,replay_ms\n")
        for r in results:
            replay = "" if r.get("replay_ms") is None else f"{r['replay_ms']:.6f}"
            f.write(f"{r['mode']},{r['op']},{r['shape']},{r.get('proc', 0)},{r.get('rep', 0)},{r['seconds']:.4f},"
                    f"{replay}\n")
    text = markdown(summary, command) + ("\n" + note + "\n" if note else "") + "\n" + \
        kernel_times.markdown(results, side)
    if status:
        text += "\nModes: " + ", ".join(f"{m}: {s}" for m, s in status.items()) + "\n"
    with open(os.path.join(out, "compile_cost.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if results_md:
        update_results_section(results_md, "compile_cost",
                               f"## Single GEMMs: compile and kernel time per mode\n\n{text}", BENCHMARK_TITLE)
    print(text)


def side_lines_beside(paths: list[str]) -> list[dict]:
    """The side-by-side lines kept with the results files ``paths``: ``side_by_side.jsonl`` beside a run's
    ``results.jsonl``, ``NAME.side_by_side.jsonl`` beside a results file kept as ``NAME.jsonl``."""
    lines = []
    for path in paths:
        folder, name = os.path.split(path)
        stem = os.path.splitext(name)[0]
        side = os.path.join(folder, side_by_side.LINES if stem == "results" else f"{stem}.{side_by_side.LINES}")
        if os.path.exists(side):
            run = paths.index(path)  # the side-by-side table pairs a shape's modes within one run only
            lines += [{**line, "run": run} for line in side_by_side.read_lines(os.path.dirname(side) or ".",
                                                                              os.path.basename(side))]
    return lines


def combined_results(prog: str, paths: list[str]) -> list[dict] | int:
    """The lines of several runs' results files (``--combine``), each tagged with its file's index (``run``),
    or the exit code after saying why not."""
    results = []
    for run, path in enumerate(paths):
        if not os.path.exists(path):
            return command_line.fail(prog, FileNotFoundError(f"{path}: no such results file"), 2)
        results += [{**line, "run": run} for line in read_results(path)]
    if not results:
        return command_line.fail(prog, ValueError(f"{', '.join(paths)}: no results lines"), 1)
    return results


def combine(paths: list[str], out: str, results_md: str | None, note: str | None = None) -> int:
    """One report over the lines of several runs' results files."""
    results = combined_results("compile_cost", paths)
    if isinstance(results, int):
        return results
    report(results, "python -m torchgen_ah.compile_cost --combine " + ",".join(paths), out, results_md, note=note,
           side=side_lines_beside(paths))
    return 0

if __name__ == "__main__":
    sys.exit(main())
