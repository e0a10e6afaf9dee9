"""Where autotuning pays: each op family's workloads under max-autotune off and default max-autotune.

    python -m torchgen_ah.evaluation.studies.autotune_map --out DIR [--families flex_attention,...]
        [--budget-s 120] [--rounds 5]
    python -m torchgen_ah.evaluation.studies.autotune_map --report DIR/*.jsonl [--results benchmarks/RESULTS.md]
        [--detail docs/where_autotuning_pays.md]

Each family runs in a fresh process of its own (``--worker``), its workloads one after another
(``autotune_families``). Per workload, in that process:

* the op compiled with max-autotune off (``torch.compile(fn)``) and with default max-autotune
  (``mode="max-autotune-no-cudagraphs"``), off first; each compile's wall time is its first call's
  (Inductor's FX-graph and autotune caches off, so default autotunes afresh);
* both compiled functions timed by CUDA-graph replay in interleaved rounds (off, default, off, ...):
  the median of each, and the spread of its rounds;
* every candidate of default's autotunings timed again by replay (``candidate_probe``; Inductor's choice
  is untouched, and the seconds this takes are taken off default's compile time): the pick, the fastest,
  and the candidate off runs (aten, or flex attention's default config), on one clock;
* default's output against off's (largest absolute difference, and relative to off's largest value).

The summary (``--results``) gives per family the geomean of default's step over off's, the fastest candidate's kernel time
over off's kernel, default's compile over off's, and the verdict against the bar that decides whether a
family is worth learning: default beats off by 3% or more on the geomean, or by 10% on one shape;
``--detail FILE`` writes every shape's row (the pick, the fastest candidate) as a section of ``FILE``.
A worker writes one JSON line per workload as it goes, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

SECTION = "autotune_map"
DETAIL_SECTION = "autotune_map_shapes"
PAYS_GEOMEAN = 0.97  # default's step over off's, geomean of a family's shapes
PAYS_ANY = 0.90  # ... or on any one shape
DEFAULT_BUDGET_S = 120.0


def _median_spread(values: list[float]) -> tuple[float, float]:
    median = statistics.median(values)
    return median, (max(values) / min(values) - 1.0) if min(values) > 0 else math.nan


def _call(compiled, inputs, training: bool):
    """One step: the forward, and for a training workload its backward (gradients of q, k, v)."""
    import torch

    if not training:
        return compiled(*inputs)
    q, k, v, grad_out = inputs
    out = compiled(q, k, v)
    return (out, *torch.autograd.grad(out, (q, k, v), grad_out))


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _difference(a, b) -> tuple[float, float]:
    """(largest |a - b|, that over the largest |a|) over every tensor of two outputs."""
    import torch

    pairs = zip(a, b) if isinstance(a, tuple) else [(a, b)]
    worst, scale = 0.0, 0.0
    for x, y in pairs:
        x, y = x.detach().float(), y.detach().float()
        worst = max(worst, (x - y).abs().max().item())
        scale = max(scale, x.abs().max().item())
    return worst, (worst / scale if scale else math.nan)


def _step_time(step, method: list) -> float:
    """One timing of ``step`` in ms: CUDA-graph replay, else (a step that cannot be captured) CUDA events
    around 20 calls. ``method`` collects which one ran."""
    import torch

    from ah_plugin.inductor.compile_tools import replay_time_ms

    try:
        ms = replay_time_ms(step)
        method.append("replay")
        return ms
    except Exception:  # noqa: BLE001 - a step the graph capture refuses is timed per call instead
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        step()
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            step()
        end.record()
        torch.cuda.synchronize()
        method.append("events")
        return start.elapsed_time(end) / 20


def _autotuning_row(tuning, off_config: dict | None) -> dict:
    """One autotuning of default's compile: its candidates and what the pick, the fastest and off's
    candidate cost by replay."""
    picked, fastest = tuning.picked, tuning.fastest
    off = tuning.by_config(off_config) if off_config else tuning.aten()
    row = {"name": tuning.name, "candidates": len(tuning.candidates),
           "picked": picked.label if picked else None,
           "picked_us": _us(picked.replay_ms) if picked else None,
           "fastest": fastest.label if fastest else None,
           "fastest_us": _us(fastest.replay_ms) if fastest else None,
           "off_candidate": off.label if off else None,
           "off_candidate_us": _us(off.replay_ms) if off else None,
           "times": {c.label: [_us(c.inductor_ms), _us(c.replay_ms)] for c in tuning.candidates}}
    return row


def _us(ms):
    return None if ms is None or not math.isfinite(ms) else round(ms * 1000.0, 3)


def measure(workload, rounds: int) -> dict:
    """Everything the map needs of one workload (see the module's docstring)."""
    import torch

    from ah_plugin.inductor.candidate_probe import flex_default_config, probe_autotunings

    fn, inputs = workload.build()
    torch.compiler.reset()  # a fresh cache per workload: no recompile limits, no dynamic shapes
    off = torch.compile(fn, dynamic=False)
    start = time.perf_counter()
    out_off = _call(off, inputs, workload.training)
    torch.cuda.synchronize()
    compile_off = time.perf_counter() - start

    default = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
    with probe_autotunings() as record:
        start = time.perf_counter()
        out_default = _call(default, inputs, workload.training)
        torch.cuda.synchronize()
        compile_default = time.perf_counter() - start - record.replay_seconds
    error, relative = _difference(out_off, out_default)

    method: list = []
    times = {"off": [], "default": []}
    steps = {"off": lambda: _call(off, inputs, workload.training),
             "default": lambda: _call(default, inputs, workload.training)}
    for _ in range(rounds):
        for mode in ("off", "default"):
            times[mode].append(_step_time(steps[mode], method))
    off_ms, off_spread = _median_spread(times["off"])
    default_ms, default_spread = _median_spread(times["default"])

    tunings = []
    for tuning in record.autotunings:
        off_config = None
        if workload.off_kernel == "flex_default" and tuning.name.startswith("flex"):
            off_config = flex_default_config(tuning.name, workload.head_dim, workload.dtype)
        tunings.append(_autotuning_row(tuning, off_config))
    main = next((t for t in tunings if t["name"] == workload.autotuned_as), None)
    best_x_off = picked_x_off = None
    if main and main["off_candidate_us"] and main["fastest_us"]:
        best_x_off = main["fastest_us"] / main["off_candidate_us"]
        picked_x_off = main["picked_us"] / main["off_candidate_us"] if main["picked_us"] else None
    return {
        "family": workload.family, "label": workload.label, "features": workload.features,
        "off_us": round(off_ms * 1000, 2), "default_us": round(default_ms * 1000, 2),
        "default_x_off": default_ms / off_ms, "off_spread": off_spread, "default_spread": default_spread,
        "timing": sorted(set(method)), "rounds": rounds,
        "compile_off_s": round(compile_off, 2), "compile_default_s": round(compile_default, 2),
        "compile_x_off": compile_default / compile_off if compile_off > 0 else None,
        "probe_replay_s": round(record.replay_seconds, 2), "probe_replay_failures": record.replay_failures,
        "kernel_best_x_off": best_x_off, "kernel_picked_x_off": picked_x_off,
        "autotunings": tunings, "max_abs_diff": error, "relative_diff": relative,
    }


def _warm_up() -> None:
    """One small compile in each mode, so no workload pays the process's first-compile costs (Triton's import,
    the compile workers' start)."""
    import torch

    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    for mode in (None, "max-autotune-no-cudagraphs"):
        torch.compiler.reset()
        torch.compile(lambda a: (a @ a).relu(), mode=mode, dynamic=False)(x)
    torch.cuda.synchronize()


def run_workloads(family: str, out_path: str, budget_s: float, only: str, one_workload, failed_row, progress,
                  prog: str = "autotune_map") -> int:
    """``one_workload(workload) -> row`` for each of the family's workloads (those whose label holds a word of
    ``only``) in this process, after a warm-up, a JSON line each appended to ``out_path`` and ``progress(row)``
    printed, within ``budget_s`` of workload time: a workload that would not fit is written as skipped, one
    that raises as ``failed_row(workload, why)``. What the map's and the modes' workers share."""
    import torch

    from ah_plugin.inductor.compile_tools import without_compile_caches

    from .autotune_families import family_workloads

    if not torch.cuda.is_available():
        print(f"{prog}: needs a CUDA GPU (the kernels are timed by CUDA-graph replay)", file=sys.stderr)
        return 2
    without_compile_caches()
    _warm_up()
    started = time.perf_counter()  # the budget is the workloads': a process's start is the caller's to plan
    longest = 0.0
    words = [w.strip() for w in only.split(",") if w.strip()]
    with open(out_path, "a", encoding="utf-8") as out:
        for workload in family_workloads(family):
            if words and not any(word in workload.label for word in words):
                continue
            if time.perf_counter() - started + longest > budget_s:
                row = failed_row(workload, {"skipped": f"budget of {budget_s:.0f} s"})
            else:
                began = time.perf_counter()
                try:
                    row = one_workload(workload)
                except Exception as exc:  # noqa: BLE001 - one workload's failure is a result, not the end
                    row = failed_row(workload, {"error": f"{type(exc).__name__}: {exc}"[:500]})
                row["seconds"] = round(time.perf_counter() - began, 1)
                longest = max(longest, row["seconds"])
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(progress(row), flush=True)
    return 0


def run_worker(family: str, out_path: str, budget_s: float, rounds: int, only: str = "") -> int:
    """Measure one family's workloads in this process, one JSON line each, within ``budget_s``."""
    return run_workloads(family, out_path, budget_s, only, lambda workload: measure(workload, rounds),
                         lambda workload, why: {"family": family, "label": workload.label, **why}, _progress_line)


def _progress_line(row: dict) -> str:
    if "skipped" in row or "error" in row:
        return f"{row['family']:24s} {row['label']:45s} {row.get('skipped') or row.get('error')}"
    best = row.get("kernel_best_x_off")
    return (f"{row['family']:24s} {row['label']:45s} default {row['default_x_off']:.3f}x off, "
            f"best kernel {best:.3f}x" if best else
            f"{row['family']:24s} {row['label']:45s} default {row['default_x_off']:.3f}x off") + \
        f", compile {row['compile_default_s']:.1f}s vs {row['compile_off_s']:.1f}s ({row['seconds']} s)"


def run_families(families: list[str], out_dir: str, budget_s: float, rounds: int, only: str = "") -> list[str]:
    """Each family in a fresh process (its own Inductor and Triton caches); the JSON-lines files written."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for family in families:
        path = os.path.join(out_dir, f"{family}.jsonl")
        cache = tempfile.mkdtemp(prefix=f"ah_map_{family}_")
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"), PYTHONUNBUFFERED="1")
        command = [sys.executable, "-m", "torchgen_ah.evaluation.studies.autotune_map", "--worker", family, "--out", path,
                   "--budget-s", str(budget_s), "--rounds", str(rounds), "--only", only]
        try:
            subprocess.run(command, env=env, timeout=budget_s + 120, check=False)
        except subprocess.TimeoutExpired:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"family": family, "label": "(the rest)",
                                      "error": f"worker killed after {budget_s + 120:.0f} s"}) + "\n")
        paths.append(path)
    return paths


# ---- the report ----------------------------------------------------------------------------------------

def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def family_verdict(rows: list[dict]) -> dict:
    """A family's summary: geomeans over its measured shapes and whether default pays against off."""
    measured = [r for r in rows if "default_x_off" in r]
    step = geomean(r["default_x_off"] for r in measured)
    best_any = min((r["default_x_off"] for r in measured), default=None)
    pays = bool(measured) and ((step is not None and step <= PAYS_GEOMEAN) or
                               (best_any is not None and best_any <= PAYS_ANY))
    return {"shapes": len(measured), "not_measured": len(rows) - len(measured), "default_x_off": step,
            "pays_on_geomean": bool(measured) and step is not None and step <= PAYS_GEOMEAN,
            "default_slower": sum(r["default_x_off"] > 1 + (1 - PAYS_GEOMEAN) for r in measured),
            "best_shape_x_off": best_any, "kernel_best_x_off": geomean(r.get("kernel_best_x_off") for r in measured),
            "compile_x_off": geomean(r.get("compile_x_off") for r in measured),
            "compile_default_s": sum(r["compile_default_s"] for r in measured), "pays": pays}


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def measured_once(rows: list[dict]) -> list[dict]:
    """One row per (family, shape): its first measurement where any run measured it (a later run's repeat is
    counted in ``repeats`` and its step ratio kept in ``repeat_x_off``), else the last word on it (skipped,
    failed)."""
    out: dict[tuple, dict] = {}
    for row in rows:
        key = (row["family"], row["label"])
        kept = out.get(key)
        if kept is None or ("default_x_off" not in kept and "default_x_off" in row):
            out[key] = dict(row)
        elif "default_x_off" in kept and "default_x_off" in row:
            kept["repeats"] = kept.get("repeats", 1) + 1
            kept.setdefault("repeat_x_off", []).append(row["default_x_off"])
        elif "default_x_off" not in kept:
            out[key] = dict(row)
    return list(out.values())


_DEFAULT_TOKENS = ("USE_TMA=False", "kpack=2", "matrix_instr_nonkdim=0", "waves_per_eu=0", "GROUP_M=8")


def short_label(label: str | None) -> str:
    """A candidate label without the keys at their usual values (ROCm's, TMA off, GROUP_M 8) and the template
    word: ``BLOCK_M=64 BLOCK_N=64 num_stages=3 num_warps=4``."""
    if not label:
        return "-"
    words = [w for w in label.split() if w not in _DEFAULT_TOKENS and w != "triton"]
    return " ".join(words).replace("num_stages=", "s").replace("num_warps=", "w")


def summary(rows: list[dict], command: str) -> str:
    """The RESULTS.md section: one line per family, and the bar."""
    rows = measured_once(rows)
    families: dict[str, list[dict]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row)
    lines = [
        "## Where autotuning pays",
        "",
        f"Command: `{command}`",
        "",
        "Per op family, on shapes from real models, each family in a fresh process with both modes compiled and "
        "timed in it (CUDA-graph replay, interleaved rounds): *default* is default max-autotune's op over max-autotune "
        "off's; *best kernel*, the fastest of default's candidates over the kernel off runs (aten, or flex "
        "attention's default config), both timed by replay inside the autotuning; *compile*, first-call wall time. "
        f"A family pays where default beats off by 3% on the geomean (<= {PAYS_GEOMEAN}) or by 10% on one shape "
        f"(<= {PAYS_ANY}). Every shape, its pick and the fastest candidate: "
        "[docs/where_autotuning_pays.md](../docs/where_autotuning_pays.md).",
        "",
        "| family | shapes | default x off, geomean (best) | shapes default loses by > 3% | best kernel x off "
        "| compile x off | pays |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for family, family_rows in families.items():
        v = family_verdict(family_rows)
        shapes = f"{v['shapes']}" + (f" (+{v['not_measured']} failed)" if v["not_measured"] else "")
        verdict = "**yes**" if v["pays_on_geomean"] else ("on some shapes" if v["pays"] else "no")
        lines.append(f"| {family} | {shapes} | {_fmt(v['default_x_off'])} ({_fmt(v['best_shape_x_off'])}) | "
                     f"{v['default_slower']} | {_fmt(v['kernel_best_x_off'])} | {_fmt(v['compile_x_off'], 1)} | "
                     f"{verdict} |")
    return "\n".join(lines)


def detail(rows: list[dict], command: str) -> str:
    """Every shape of every family: step and kernel ratios, default's pick and the fastest candidate."""
    rows = measured_once(rows)
    lines = [f"Command: `{command}`", "",
             "| family | shape | off us | default us | default x off | spread off/default | best kernel x off "
             "| default's pick | fastest candidate | compile off / default s | max diff |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |"]
    for r in rows:
        family = r["family"]
        if "default_x_off" not in r:
            lines.append(f"| {family} | {r['label']} | - | - | - | - | - | "
                         f"{(r.get('skipped') or r.get('error', ''))[:80]} | - | - | - |")
            continue
        main = next((t for t in r["autotunings"] if t["name"] == family), None)
        pick = short_label(main["picked"]) if main else "no autotuning (one candidate)"
        fastest = short_label(main["fastest"]) if main else "-"
        lines.append(
            f"| {family} | {r['label']} | {r['off_us']:.1f} | {r['default_us']:.1f} | "
            f"{r['default_x_off']:.3f} | {r['off_spread']:.1%} / {r['default_spread']:.1%} | "
            f"{_fmt(r.get('kernel_best_x_off'))} | {pick} | {fastest} | "
            f"{r['compile_off_s']:.1f} / {r['compile_default_s']:.1f} | {r['relative_diff']:.1e} |")
    return "\n".join(lines)


def read_rows(paths: list[str], what: str = "a map row") -> list[dict]:
    """Every row of the JSON-lines files (each needs its family and label; ``what``: a row, in words)."""
    from torchgen_ah.evaluation.json_lines import read_json_lines

    rows = []
    for path in paths:
        rows.extend(read_json_lines(path, ("family", "label"), what))
    return rows


def main(argv=None) -> int:
    from ah_plugin.report.command_line import parser as make_parser

    from .autotune_families import FAMILY_NAMES

    parser = make_parser("torchgen_ah.evaluation.studies.autotune_map", __doc__.splitlines()[0])
    parser.add_argument("--out", help="folder for the JSON-lines files (one per family)")
    parser.add_argument("--families", default=",".join(FAMILY_NAMES),
                        help="comma-separated families, in the order they run")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help="seconds per family; workloads that would not fit are listed as not measured")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per workload")
    parser.add_argument("--only", default="", help="comma-separated words: only the workloads whose label holds one")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--report", nargs="+", help="JSON-lines files to report on (no GPU needed)")
    parser.add_argument("--results", help="write the summary as a section of this markdown file")
    parser.add_argument("--detail", help="write every shape's row as a section of this markdown file")
    parser.add_argument("--command", default="", help="the command line quoted in the report")
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker(args.worker, args.out, args.budget_s, args.rounds, args.only)
    if args.report:
        paths = args.report
    else:
        if not args.out:
            parser.error("--out is needed to run the families (or --report FILES to report on a run)")
        families = [f.strip() for f in args.families.split(",") if f.strip()]
        unknown = [f for f in families if f not in FAMILY_NAMES]
        if unknown:
            parser.error(f"unknown families {', '.join(unknown)}; known: {', '.join(FAMILY_NAMES)}")
        paths = run_families(families, args.out, args.budget_s, args.rounds, args.only)
    from torchgen_ah.evaluation.results_section import publish_report

    command = args.command or "python -m torchgen_ah.evaluation.studies.autotune_map " + " ".join(
        argv if argv is not None else sys.argv[1:])
    try:
        rows = read_rows(paths)
    except (OSError, ValueError) as exc:  # a missing file, a bad line: named, no traceback
        from ah_plugin.report.command_line import fail
        return fail("python -m torchgen_ah.evaluation.studies.autotune_map", exc)
    figures = {family: family_verdict([r for r in measured_once(rows) if r["family"] == family])
               for family in dict.fromkeys(r["family"] for r in rows)}
    if args.detail:
        from torchgen_ah.evaluation.results_section import update_results_section

        update_results_section(args.detail, DETAIL_SECTION, detail(rows, command))
    return publish_report(summary(rows, command), figures, SECTION, None, args.results)


if __name__ == "__main__":
    sys.exit(main())
