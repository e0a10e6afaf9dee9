"""The plugin's modes on the map's workloads: what fast and quality mode give where autotuning pays.

    python -m torchgen_ah.evaluation.studies.family_modes --out DIR --families int_mm,flex_decoding
        [--modes fast,quality] [--artifact-dir DIR] [--budget-s 200] [--rounds 7] [--only WORDS]
    python -m torchgen_ah.evaluation.studies.family_modes --report DIR/*.jsonl [--results benchmarks/RESULTS.md]

The map (``autotune_map``) says which op families default max-autotune beats max-autotune off on; this is
the check that closes a family's loop once an artifact ranks it. Per workload of a family
(``autotune_families``), in one fresh process per family: off, default max-autotune and each plugin mode
(fast, quality: ``ah_plugin.enabled(use=<the family's op>, top_k=mode)``, with the artifacts of
``--artifact-dir`` beside the package's) are compiled one after another (Inductor's caches off, so every
mode autotunes afresh), then timed by CUDA-graph replay in interleaved rounds, the order rotating each
round; every mode's output is compared with off's. Compiles in one process share the kernels an earlier
mode built, so the compile times the bars use come from a fresh process for off and for each plugin mode
(``--compile-worker``: after a warm-up, the family's shapes one after another, fresh Inductor and Triton
caches; each shape's first-call wall time, the artifact's first load included, as a user's first compile
pays it); default's compile is the one process's (the map has it from a fresh process).
``--no-fresh-compile``, or a budget too small for the fresh processes, reports the one process's compile
for every mode, and the report marks those.

The report gives per family and mode the geomean of the step over off's and the worst shape, the compile
over off's, and for quality the share of default's gain over off it keeps (on the shapes both measured),
against the bars a learned family must meet: fast never slower than off (<= 1.005x on every shape) at
<= 1.3x off's compile, quality >= 90% of default's gain at <= 1.3x off's compile. A mode that failed on
a shape misses its bar.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .autotune_map import _call, _difference, _median_spread, _step_time, geomean, read_rows, run_workloads

SECTION = "family_modes"
PROG = "family_modes"
FRESH_COMPILE = "compile_worker"  # the kind of a row written by a fresh process compiling one mode
PLUGIN_MODES = ("fast", "quality")
FAST_BAR = 1.005  # fast mode's step over off's, on every shape
FAST_COMPILE_BAR = 1.3  # fast mode's compile over off's (the zoo's and evaluate's fast bar)
QUALITY_GAIN_BAR = 0.90  # the share of default's gain over off quality mode keeps
QUALITY_COMPILE_BAR = 1.3  # quality mode's compile over off's
DEFAULT_BUDGET_S = 200.0  # per family: the steps' process and the fresh compiles
STEPS_SHARE = 0.55  # of a family's budget, for the process that times the steps (the rest: fresh compiles)
PROCESS_START_S = 20.0  # a fresh worker's start and warm-up, outside its own budget
GRACE_S = 45.0  # how long past its budget a worker may run (a workload started in time) before it is killed
# the ops a family's workloads autotune, where more than the one the map names (a training step's forward)
USE_OPS = {"flex_attention_backward": ("flex_attention", "flex_attention_backward")}


def use_ops(family: str, autotuned_as: str) -> tuple[str, ...]:
    """The plugin's use ops for one family's workloads."""
    return USE_OPS.get(family, (autotuned_as,))


def _compile(fn, inputs, training: bool, mode: str, ops: tuple, artifact_dir: str | None, index: int):
    """(compiled fn, its first output, first-call seconds) of one mode; a plugin mode compiles in its scope,
    its options made unequal to every earlier compile's (else Dynamo would run their code)."""
    import contextlib

    import torch

    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from torchgen_ah.evaluation.one_process import neutral_options

    scope = contextlib.nullcontext()
    if mode not in ("off", "default", *PLUGIN_MODES):
        raise ValueError(f"unknown mode {mode!r}")
    if mode in PLUGIN_MODES:
        scope = ah_plugin.enabled(use=list(ops), top_k=mode, artifact_dir=artifact_dir)
    with scope:
        if mode == "off":
            compiled = torch.compile(fn, dynamic=False)
        elif mode == "default":
            compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        else:  # the mode's options as torch.compile(mode=...) would give them under the plugin (narrowed)
            options = dict(compile_tools.mode_options("max-autotune-no-cudagraphs"))
            options.update(neutral_options(index))
            compiled = torch.compile(fn, options=options, dynamic=False)
        start = time.perf_counter()
        out = _call(compiled, inputs, training)
        torch.cuda.synchronize()
        return compiled, out, time.perf_counter() - start


def measure(workload, modes: tuple, rounds: int, artifact_dir: str | None) -> dict:
    """Every mode of one workload compiled and timed in this process (see the module's docstring)."""
    import torch

    from ah_plugin.inductor import compile_tools
    from torchgen_ah.evaluation.one_process import recompiled

    fn, inputs = workload.build()
    torch.compiler.reset()  # a fresh Dynamo cache per workload: no recompile limits, no dynamic shapes
    ops = use_ops(workload.family, workload.autotuned_as)
    compiled, outputs, compile_s, failures = {}, {}, {}, {}
    for index, mode in enumerate(("off", "default", *modes)):
        try:
            compiled[mode], outputs[mode], compile_s[mode] = _compile(
                fn, inputs, workload.training, mode, ops, artifact_dir, index)
        except Exception as exc:  # noqa: BLE001 - a mode that fails to compile is a result
            failures[mode] = f"{type(exc).__name__}: {exc}"[:300]
    if "off" not in compiled:
        raise RuntimeError(f"max-autotune off failed: {failures.get('off')}")
    graphs = compile_tools.dynamo_graph_count()
    method: list = []
    times: dict[str, list[float]] = {mode: [] for mode in compiled}
    names = list(compiled)
    for r in range(rounds):
        for mode in names[r % len(names):] + names[: r % len(names)]:
            times[mode].append(_step_time(lambda c=compiled[mode]: _call(c, inputs, workload.training), method))
    off_ms, _ = _median_spread(times["off"])
    row = {"family": workload.family, "label": workload.label, "features": workload.features,
           "use_ops": list(ops), "rounds": rounds, "timing": sorted(set(method)), "failures": failures,
           "recompiled_while_timing": recompiled(graphs, "the timing rounds", "family_modes"), "modes": {}}
    for mode in compiled:
        ms, spread = _median_spread(times[mode])
        error, relative = _difference(outputs["off"], outputs[mode])
        row["modes"][mode] = {"us": round(ms * 1000, 2), "x_off": ms / off_ms, "spread": spread,
                              "compile_s": round(compile_s[mode], 2),
                              "compile_x_off": compile_s[mode] / compile_s["off"] if compile_s["off"] > 0 else None,
                              "max_abs_diff": error, "relative_diff": relative}
    return row


def compile_once(workload, mode: str, artifact_dir: str | None) -> dict:
    """One mode's compile of one workload, in a process that compiles this mode only: its first-call seconds."""
    import torch

    fn, inputs = workload.build()
    torch.compiler.reset()
    ops = use_ops(workload.family, workload.autotuned_as)
    _, _, seconds = _compile(fn, inputs, workload.training, mode, ops, artifact_dir, 0)
    torch.compiler.reset()
    torch.cuda.empty_cache()
    return {"family": workload.family, "label": workload.label, "kind": FRESH_COMPILE, "mode": mode,
            "compile_s": round(seconds, 2)}


def progress_line(row: dict) -> str:
    head = f"{row['family']:24s} {row['label'][:45]:45s}"
    if row.get("kind") == FRESH_COMPILE:
        return f"{head} {row['mode']} " + (f"compiled in {row['compile_s']:.1f} s (fresh process)" if "compile_s" in row
                                          else str(row.get("skipped") or row.get("error")))
    if "modes" not in row:
        return f"{head} {row.get('skipped') or row.get('error')}"
    parts = [f"{mode} {m['x_off']:.3f}x ({m['compile_s']:.1f} s)" for mode, m in row["modes"].items() if mode != "off"]
    failed = [f"{mode} failed" for mode in row.get("failures", {})]
    return f"{head} off {row['modes']['off']['compile_s']:.1f} s; " + ", ".join(parts + failed)


def _fresh_process(path: str, arguments: list[str], budget_s: float, artifact_dir: str | None, killed: dict) -> None:
    """One worker of this module in a fresh process with its own Inductor and Triton caches (removed after);
    ``killed``: the row written when it runs past its budget and grace."""
    cache = tempfile.mkdtemp(prefix="ah_modes_")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
               TRITON_CACHE_DIR=os.path.join(cache, "triton"), PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "torchgen_ah.evaluation.studies.family_modes", *arguments, "--out", path,
               "--budget-s", str(budget_s)]
    if artifact_dir:
        command += ["--artifact-dir", artifact_dir]
    limit = budget_s + PROCESS_START_S + GRACE_S
    try:
        subprocess.run(command, env=env, timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({**killed, "error": f"worker killed after {limit:.0f} s"}) + "\n")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def run_families(families: list[str], out_dir: str, modes: tuple, budget_s: float, rounds: int, only: str,
                 artifact_dir: str | None, fresh_compile: bool = True) -> list[str]:
    """Per family, within about ``budget_s`` (each process's start counted): the steps in one fresh process
    (``STEPS_SHARE`` of it), then (``fresh_compile``) off's and each plugin mode's compiles in a fresh process
    of their own, sharing the rest; none where the rest cannot pay their starts. The JSON-lines files written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    compiled_fresh = ("off", *modes) if fresh_compile else ()
    each = (budget_s * (1 - STEPS_SHARE)) / max(1, len(compiled_fresh)) - PROCESS_START_S
    if each <= 0:
        compiled_fresh = ()  # too little time: the one process's compiles, marked in the report
    steps_s = budget_s * (STEPS_SHARE if compiled_fresh else 1.0) - PROCESS_START_S
    for family in families:
        path = os.path.join(out_dir, f"modes_{family}.jsonl")
        _fresh_process(path, ["--worker", family, "--modes", ",".join(modes), "--rounds", str(rounds), "--only", only],
                       steps_s, artifact_dir, {"family": family, "label": "(the rest)"})
        for mode in compiled_fresh:
            _fresh_process(path, ["--compile-worker", family, "--compile-mode", mode, "--only", only], each,
                           artifact_dir, {"family": family, "label": "(the rest)", "kind": FRESH_COMPILE, "mode": mode})
        paths.append(path)
    return paths


# ---- the report ----------------------------------------------------------------------------------------

def gain_kept(quality_x_off: float | None, default_x_off: float | None) -> float | None:
    """The share of default's gain over off that quality keeps: (1 - quality) / (1 - default); None where
    default gains nothing (a share of no gain means nothing)."""
    if quality_x_off is None or default_x_off is None or default_x_off >= 1.0:
        return None
    return (1.0 - quality_x_off) / (1.0 - default_x_off)


def fresh_compiles(rows: list[dict]) -> dict[tuple[str, str], dict[str, float]]:
    """{(family, label): {mode: seconds}} of the fresh-process compiles (the first measurement of each)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for row in rows:
        if row.get("kind") == FRESH_COMPILE and "compile_s" in row:
            out.setdefault((row["family"], row["label"]), {}).setdefault(row["mode"], row["compile_s"])
    return out


def _compile_ratios(mode: str, rows: list[dict], fresh: dict) -> tuple[list, bool]:
    """The mode's compile over off's per shape: every shape's fresh processes' where all were measured (one
    process's ratios are not comparable with them), else every shape's one process's; and whether fresh."""
    seconds = [fresh.get((r["family"], r["label"]), {}) for r in rows]
    if rows and all(mode in s and s.get("off") for s in seconds):
        return [s[mode] / s["off"] for s in seconds], True
    return [r["modes"][mode]["compile_x_off"] for r in rows], False


def family_figures(rows: list[dict]) -> dict:
    """Per mode: geomean step and compile over off's, the worst shape's step; quality's share of default's
    gain (on the shapes both measured); and the bars' verdicts (a mode that failed on a shape misses)."""
    fresh = fresh_compiles(rows)
    timed = [r for r in rows if r.get("kind") != FRESH_COMPILE]
    measured = [r for r in timed if "modes" in r]
    modes = list(dict.fromkeys(mode for r in measured for mode in [*r["modes"], *r.get("failures", {})]
                               if mode != "off"))
    out: dict = {"shapes": len(measured), "not_measured": len(timed) - len(measured), "modes": {}}
    for mode in modes:
        have = [r for r in measured if mode in r["modes"]]
        ratios, is_fresh = _compile_ratios(mode, have, fresh)
        out["modes"][mode] = {"shapes": len(have), "x_off": geomean(r["modes"][mode]["x_off"] for r in have),
                              "worst_x_off": max((r["modes"][mode]["x_off"] for r in have), default=None),
                              "compile_x_off": geomean(ratios), "compile_in_one_process": bool(have) and not is_fresh,
                              "failed": sum(mode in r.get("failures", {}) for r in measured)}
    fast, quality = out["modes"].get("fast"), out["modes"].get("quality")
    if fast:
        fast["meets_bar"] = (bool(fast["shapes"]) and not fast["failed"] and fast["worst_x_off"] <= FAST_BAR
                             and (fast["compile_x_off"] or 0) <= FAST_COMPILE_BAR)
    if quality:
        both = [r for r in measured if "quality" in r["modes"] and "default" in r["modes"]]
        quality["gain_kept"] = gain_kept(geomean(r["modes"]["quality"]["x_off"] for r in both),
                                         geomean(r["modes"]["default"]["x_off"] for r in both))
        quality["meets_bar"] = (bool(quality["shapes"]) and not quality["failed"] and quality["gain_kept"] is not None
                                and quality["gain_kept"] >= QUALITY_GAIN_BAR
                                and (quality["compile_x_off"] or 0) <= QUALITY_COMPILE_BAR)
    return out


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary(rows: list[dict], command: str) -> str:
    """The RESULTS.md section: a line per (family, mode), the bars beside."""
    families: dict[str, list[dict]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row)
    lines = [
        "## The plugin's modes where autotuning pays",
        "",
        f"Command: `{command}`",
        "",
        "Per op family, on the map's shapes, in one process per family: max-autotune off, default max-autotune and "
        "the plugin's modes compiled one after another and timed by CUDA-graph replay in interleaved rounds. *step*: "
        "the geomean over the shapes of each mode's step over off's (worst shape in brackets); *compile*: first-call "
        f"wall time over off's, each mode in a fresh process (marked * where the one process's is given: it reuses "
        f"kernels an earlier mode compiled). Bars: fast <= {FAST_BAR}x off on every shape at <= {FAST_COMPILE_BAR}x "
        f"off's compile; quality keeps >= {QUALITY_GAIN_BAR:.0%} of default's gain over off (on the shapes both "
        f"measured) at <= {QUALITY_COMPILE_BAR}x off's compile; a mode that failed on a shape misses.",
        "",
        "| family | mode | shapes | step x off (worst) | compile x off | quality keeps of default's gain | bar |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for family, family_rows in families.items():
        figures = family_figures(family_rows)
        for mode, m in figures["modes"].items():
            kept = f"{m['gain_kept']:.0%}" if m.get("gain_kept") is not None else "-"
            bar = {True: "met", False: "**missed**"}.get(m.get("meets_bar"), "-")
            failed = f" ({m['failed']} failed)" if m["failed"] else ""
            star = "*" if m["compile_in_one_process"] else ""
            lines.append(f"| {family} | {mode} | {m['shapes']}{failed} | {_fmt(m['x_off'])} ({_fmt(m['worst_x_off'])}) | "
                         f"{_fmt(m['compile_x_off'], 2)}{star} | {kept} | {bar} |")
        if figures["not_measured"]:
            lines.append(f"| {family} | - | {figures['not_measured']} not measured | - | - | - | - |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from ah_plugin.report.command_line import parser as make_parser

    from .autotune_families import FAMILY_NAMES

    parser = make_parser("torchgen_ah.evaluation.studies.family_modes", __doc__.splitlines()[0])
    parser.add_argument("--out", help="folder for the JSON-lines files (one per family)")
    parser.add_argument("--families", default="", help="comma-separated families of the map, in the order they run")
    parser.add_argument("--modes", default=",".join(PLUGIN_MODES),
                        help="the plugin's modes besides off and default (fast, quality)")
    parser.add_argument("--artifact-dir", default=None,
                        help="a folder of artifacts used beside the package's (a family's new ranking)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help="seconds per family; workloads that would not fit are listed as not measured")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds per workload")
    parser.add_argument("--only", default="", help="comma-separated words: only the workloads whose label holds one")
    parser.add_argument("--no-fresh-compile", action="store_true",
                        help="report the compile times of the one process that times the steps (no fresh process "
                             "per mode: quicker, but a mode reuses kernels an earlier one compiled)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--compile-worker", help=argparse.SUPPRESS)
    parser.add_argument("--compile-mode", help=argparse.SUPPRESS)
    parser.add_argument("--report", nargs="+", help="JSON-lines files to report on (no GPU needed)")
    parser.add_argument("--results", help="write the summary as a section of this markdown file")
    parser.add_argument("--command", default="", help="the command line quoted in the report")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = [m for m in modes if m not in PLUGIN_MODES]
    if unknown:
        parser.error(f"unknown modes {', '.join(unknown)}; known: {', '.join(PLUGIN_MODES)}")
    if args.artifact_dir and not os.path.isdir(args.artifact_dir):
        parser.error(f"--artifact-dir {args.artifact_dir}: no such folder")
    if args.rounds < 1 or args.budget_s <= 0:
        parser.error("--rounds needs at least 1 round and --budget-s more than 0 seconds")
    if args.compile_worker and args.compile_mode not in ("off", *PLUGIN_MODES):
        parser.error(f"--compile-mode must be off or one of {', '.join(PLUGIN_MODES)}")
    if (args.worker or args.compile_worker) and not args.out:
        parser.error("a worker needs --out (the JSON-lines file it appends to)")
    artifact_dir = os.path.abspath(args.artifact_dir) if args.artifact_dir else None
    if args.worker:
        return run_workloads(args.worker, args.out, args.budget_s, args.only,
                             lambda w: measure(w, modes, args.rounds, artifact_dir),
                             lambda w, why: {"family": w.family, "label": w.label, **why}, progress_line, PROG)
    if args.compile_worker:
        return run_workloads(args.compile_worker, args.out, args.budget_s, args.only,
                             lambda w: compile_once(w, args.compile_mode, artifact_dir),
                             lambda w, why: {"family": w.family, "label": w.label, "kind": FRESH_COMPILE,
                                             "mode": args.compile_mode, **why}, progress_line, PROG)
    if args.report:
        paths = args.report
    else:
        families = [f.strip() for f in args.families.split(",") if f.strip()]
        if not args.out or not families:
            parser.error("--out and --families are needed to run (or --report FILES to report on a run)")
        unknown = [f for f in families if f not in FAMILY_NAMES]
        if unknown:
            parser.error(f"unknown families {', '.join(unknown)}; known: {', '.join(FAMILY_NAMES)}")
        paths = run_families(families, args.out, modes, args.budget_s, args.rounds, args.only, artifact_dir,
                             fresh_compile=not args.no_fresh_compile)
    from torchgen_ah.evaluation.results_section import publish_report

    command = args.command or "python -m torchgen_ah.evaluation.studies.family_modes " + " ".join(
        argv if argv is not None else sys.argv[1:])
    try:
        rows = read_rows(paths, "a modes row")
    except (OSError, ValueError) as exc:  # a missing file, a bad line: named, no traceback
        from ah_plugin.report.command_line import fail
        return fail(PROG, exc)
    figures = {family: family_figures([r for r in rows if r["family"] == family])
               for family in dict.fromkeys(r["family"] for r in rows)}
    return publish_report(summary(rows, command), figures, SECTION, None, args.results)


if __name__ == "__main__":
    sys.exit(main())
