"""What each mode's compiled GEMM costs when it runs, and how well each timing method picks.

Reads the per-shape lines ``compile_cost`` writes (``replay_ms``: the compiled function timed by
CUDA-graph replay; ``timings``: every candidate's time as the mode's autotuner measured it):

* ``kernel_rows``: per shape, each mode's replay time (the median over the mode's processes) and the
  plugin modes' ratios to the better of max-autotune off and default max-autotune (the fast-mode bar:
  geomean <= 1.00, worst <= 1.05; the quality-mode bar: geomean >= 1.05x faster, none slower than 1.01x);
* ``method_agreement``: how often default max-autotune's pick (Inductor's per-call event timing) and the
  plugin's replay pick differ from the replay-fastest candidate, and what each pick costs under replay.
  The reference is a second, independent replay autotuning of the same shape (``replay_all`` repetition
  2), so the replay pick is not graded on its own measurement.
"""

from __future__ import annotations

import statistics

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation import result_check

FAST_BAR_GEOMEAN = 1.00
FAST_BAR_WORST = 1.05
QUALITY_BAR_GEOMEAN = 1 / 1.05
QUALITY_BAR_WORST = 1.01
# the plugin's modes judged against min(off, default), with their bars (geomean, worst)
JUDGED = {"fast": (FAST_BAR_GEOMEAN, FAST_BAR_WORST), "quality": (QUALITY_BAR_GEOMEAN, QUALITY_BAR_WORST),
          "quality_padded": (QUALITY_BAR_GEOMEAN, QUALITY_BAR_WORST)}


def _by_mode(results: list[dict]) -> dict:
    """{mode: {shape: [lines by repetition]}}."""
    out: dict = {}
    for r in results:
        out.setdefault(r["mode"], {}).setdefault(r["shape"], []).append(r)
    for shapes in out.values():
        for lines in shapes.values():
            lines.sort(key=lambda r: r.get("rep", 0))
    return out


def kernel_rows(results: list[dict], modes=("off", "default")) -> list[dict]:
    """Per shape timed with max-autotune off: {"shape", mode: median replay ms over the mode's processes
    (None where not timed), and for each judged mode present ("fast", "quality"): its ms and
    "<mode>_vs_best", its ratio to the best of the listed modes that were timed (off alone when default
    max-autotune did not finish the shape)}."""
    by_mode = _by_mode(results)
    judged = [m for m in JUDGED if m in by_mode]
    shapes = [s for s in by_mode.get("off", {}) if _replay(by_mode, "off", s)]
    rows = []
    for shape in shapes:
        row = {"shape": shape, **{mode: _replay(by_mode, mode, shape) for mode in modes}}
        best = min(row[m] for m in modes if row[m])
        for mode in judged:
            ms = _replay(by_mode, mode, shape)
            if ms:
                row[mode], row[f"{mode}_vs_best"] = ms, ms / best
        rows.append(row)
    return rows


def _replay(by_mode: dict, mode: str, shape: str) -> float | None:
    """The median replay ms of a (mode, shape) over its processes; None when none was timed."""
    times = [line["replay_ms"] for line in by_mode.get(mode, {}).get(shape, []) if line.get("replay_ms")]
    return statistics.median(times) if times else None


def cache_rows(results: list[dict]) -> list[dict]:
    """Per shape compiled in both the results cache's record run and its hit run: {"shape", "record", "hit"
    (replay ms, None off a GPU), "ratio" (None without both), "hit_benchmarked": candidates the hit run
    timed (0 when answered from the file), "same_code": whether both generated the same code (None when a
    line has no fingerprint)}."""
    by_mode = _by_mode(results)
    record, hit = by_mode.get("cache_record", {}), by_mode.get("cache", {})
    rows = []
    for shape, lines in hit.items():
        if shape not in record:
            continue
        first, recorded = lines[0], record[shape][0]
        timed = sum(len(tm) for tm in first.get("timings", []) if len(tm) > 1)
        both = first.get("replay_ms") is not None and recorded.get("replay_ms") is not None
        codes = first.get("code"), recorded.get("code")
        rows.append({"shape": shape, "record": recorded.get("replay_ms"), "hit": first.get("replay_ms"),
                     "ratio": first["replay_ms"] / recorded["replay_ms"] if both else None,
                     "hit_benchmarked": timed, "same_code": codes[0] == codes[1] if all(codes) else None})
    return rows


def cache_lines(cached: list[dict]) -> list[str]:
    """The record/hit table and its verdict: nothing benchmarked in the hit run, the same kernels (replay
    within 2%); the code comparison says whether a replay gap is the kernels or the processes."""
    def us(ms):
        return "-" if ms is None else f"{1e3 * ms:.1f}"

    lines = ["", "Results cache: a record run, then a hit run in a fresh process (replay us):", "",
             "| shape | record | hit | hit / record | benchmarked in the hit run | same generated code |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in cached:
        same = {True: "yes", False: "no", None: "-"}[r["same_code"]]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(f"| {r['shape']} | {us(r['record'])} | {us(r['hit'])} | {ratio} | {r['hit_benchmarked']} | {same} |")
    none_timed = all(r["hit_benchmarked"] == 0 for r in cached)
    compared = [r for r in cached if r["same_code"] is not None]
    code = (f"; the same generated code on {sum(r['same_code'] for r in compared)} of {len(compared)}"
            if compared else "")
    ratios = [r["ratio"] for r in cached if r["ratio"] is not None]
    if ratios:
        worst = max(abs(x - 1.0) for x in ratios)
        timing = (f"; kernels within {100 * worst:.1f}% of the record run's (bar: 0 benchmarked, within 2%: "
                  f"{'met' if none_timed and worst <= 0.02 and len(ratios) == len(cached) else 'missed'})")
    elif not none_timed:
        timing = " (bar: 0 benchmarked: missed)"
    else:
        timing = " (no replay times: not judged against the 2% bar)"
    return lines + ["", f"Hit run: {'nothing' if none_timed else 'something'} benchmarked{code}{timing}."]


def _pick(timings: list[dict]) -> tuple[str | None, dict]:
    """(the fastest id, its timings) of a shape's GEMM autotuning (the largest one when a line holds several)."""
    finite = [{c: t for c, t in tm.items() if t == t and t != float("inf")} for tm in timings]
    finite = [tm for tm in finite if tm]
    if not finite:
        return None, {}
    tm = max(finite, key=len)
    return min(tm, key=tm.get), tm


def method_agreement(results: list[dict]) -> dict | None:
    """{"shapes", "per_call_differs", "replay_differs", "per_call_regret", "replay_regret", "rows"} over the
    shapes with a default-mode autotuning and two replay autotunings; None when there are none."""
    by_mode = _by_mode(results)
    default, replay = by_mode.get("default", {}), by_mode.get("replay_all", {})
    rows = []
    for shape, lines in replay.items():
        if len(lines) < 2 or shape not in default:
            continue
        per_call_pick, _ = _pick(default[shape][0]["timings"])
        replay_pick, _ = _pick(lines[0]["timings"])
        best, reference = _pick(lines[1]["timings"])
        if best is None or per_call_pick not in reference or replay_pick not in reference:
            continue
        rows.append({"shape": shape, "replay_fastest": best, "per_call_pick": per_call_pick,
                     "replay_pick": replay_pick,
                     "per_call_regret": reference[per_call_pick] / reference[best],
                     "replay_regret": reference[replay_pick] / reference[best]})
    if not rows:
        return None
    return {"shapes": len(rows),
            "per_call_differs": sum(r["per_call_pick"] != r["replay_fastest"] for r in rows),
            "replay_differs": sum(r["replay_pick"] != r["replay_fastest"] for r in rows),
            "per_call_regret": geomean([r["per_call_regret"] for r in rows]),
            "replay_regret": geomean([r["replay_regret"] for r in rows]),
            "rows": rows}


def _short(choice: str) -> str:
    return "aten" if choice.startswith("extern_") else choice.replace("type=triton_", "").replace("BLOCK-", "")[:40]


def _process_count(results: list[dict]) -> int:
    """The most fresh processes any (mode, shape) was timed in: ``compile_cost --reps``, or runs combined
    (``--combine``), whose processes share their ``proc`` numbers."""
    counts: dict = {}
    for r in results:
        if not r.get("rep", 0):
            counts[r["mode"], r["shape"]] = counts.get((r["mode"], r["shape"]), 0) + 1
    return max(counts.values(), default=1)


def _verdict(mode: str, ratios: list[float], judged_fully: bool) -> str:
    """Met or missed against the mode's bars. Where default max-autotune is missing on a shape the ratio is
    to off alone, a lower bound of the one to min(off, default): a miss is a miss either way, and the
    table's '-' cells show which shapes were judged against off alone."""
    bar_gm, bar_worst = JUDGED[mode]
    if geomean(ratios) <= bar_gm and max(ratios) <= bar_worst:
        return "met" if judged_fully else "not judged: default max-autotune not measured on every shape"
    return "missed"


def kernel_table(rows: list[dict], processes: int, title: str | None = None) -> list[str]:
    """The per-shape replay times of each mode, the judged modes' ratios and their verdicts (``title``: the
    line above the table, by default the per-process one)."""
    judged = [m for m in JUDGED if any(m in r for r in rows)]
    title = title or (f"Kernel time by CUDA-graph replay (us), fresh process and cache per mode (the median over "
                      f"{processes} process{'es' if processes > 1 else ''}):")
    lines = [title, "",
             "| " + " | ".join(["shape", "off", "default", *judged, *(f"{m} / min(off, default)" for m in judged)])
             + " |", "| --- | " + " | ".join("---:" for _ in range(2 + 2 * len(judged))) + " |"]
    for r in rows:
        cells = [f"{1e3 * r[m]:.1f}" if r.get(m) else "-" for m in ("off", "default", *judged)]
        cells += [f"{r[m + '_vs_best']:.3f}" if m in r else "-" for m in judged]
        lines.append(f"| {r['shape']} | " + " | ".join(cells) + " |")
    lines.append("")
    if not all(r.get("default") for r in rows):
        lines += ["'-' under default: default max-autotune did not finish that shape; its ratios are to off "
                  "alone.", ""]
    for mode in judged:
        ratios = [r[f"{mode}_vs_best"] for r in rows if mode in r]
        bar_gm, bar_worst = JUDGED[mode]
        verdict = _verdict(mode, ratios, all(r.get("default") for r in rows if mode in r))
        lines.append(f"{mode.capitalize()} mode over {len(ratios)} shapes: geomean {geomean(ratios):.3f}x, worst "
                     f"{max(ratios):.3f}x of min(off, default) (bar: <= {bar_gm:.3f}x, worst <= {bar_worst:.2f}x: "
                     f"{verdict}).")
    return lines


def _paired(lines: dict, mode: str, baselines=("off", "default")) -> float:
    """``mode``'s time over the best baseline's, round by round (each round timed every mode once, so a drift
    of the GPU's clock over the rounds cancels), the median over rounds; the medians' ratio when the rounds
    do not pair up."""
    base = [lines[m] for m in baselines if m in lines]
    rounds = [line.get("rounds") or [] for line in (lines[mode], *base)]
    if len({len(r) for r in rounds}) == 1 and rounds[0]:
        return statistics.median(r / min(b[i] for b in rounds[1:]) for i, r in enumerate(rounds[0]))
    return lines[mode]["ms"] / min(b["ms"] for b in base)


def side_rows(side: list[dict]) -> list[dict]:
    """Per shape, the side-by-side times and ratios of one run (``run``: the results file it came from under
    ``--combine``, 0 otherwise): the latest run that timed default max-autotune on the shape, else the latest
    that timed off. Times of one mode over several processes: the median; a judged mode's ratio: the median
    over processes of its round-by-round ratio to the better of off and default (``_paired``)."""
    by_shape: dict = {}
    for line in side:
        by_shape.setdefault(line["shape"], {}).setdefault(line.get("run", 0), {}).setdefault(
            line.get("proc", 0), {})[line["mode"]] = line
    rows = []
    for shape, runs in by_shape.items():
        timed = {run: procs for run, procs in runs.items() if any("off" in modes for modes in procs.values())}
        if not timed:
            continue
        with_default = [run for run, procs in timed.items() if any("default" in m for m in procs.values())]
        run = max(with_default or timed)
        procs = timed[run]
        row = {"shape": shape, "run": run}
        for mode in ("off", "default", *JUDGED):
            times = [modes[mode]["ms"] for modes in procs.values() if mode in modes]
            row[mode] = statistics.median(times) if times else None
        for mode in JUDGED:
            ratios = [_paired(modes, mode) for modes in procs.values() if mode in modes and "off" in modes]
            if ratios:
                row[f"{mode}_vs_best"] = statistics.median(ratios)
            else:
                row.pop(mode)
        rows.append(row)
    return rows


def identical_code_spread(results: list[dict], side: list[dict]) -> tuple[float, float, int] | None:
    """(lowest, highest, pairs) of the round-by-round ratio between two modes of one shape, run and process
    that generated the same code (the same fingerprint): the side-by-side timing's own noise, the size a
    difference must exceed to be the kernels'. None without such a pair."""
    code = {(r.get("run", 0), r.get("proc", 0), r["shape"], r["mode"]): r.get("code") for r in results
            if not r.get("rep", 0)}
    groups: dict = {}
    for line in side:
        groups.setdefault((line.get("run", 0), line.get("proc", 0), line["shape"]), {})[line["mode"]] = line
    ratios = []
    for key, lines in groups.items():
        modes = sorted(lines)
        for i, a in enumerate(modes):
            for b in modes[i + 1:]:
                ca, cb = code.get((*key, a)), code.get((*key, b))
                if ca and ca == cb:
                    ratios.append(_paired(lines, a, (b,)))
    return (min(ratios), max(ratios), len(ratios)) if ratios else None


def side_by_side_title(side: list[dict]) -> str:
    """The line above the side-by-side table: how its times were taken."""
    rounds = max((len(line.get("rounds", [])) for line in side), default=0)
    how = "CUDA-graph replay" if all(line.get("method") == "cudagraph_replay" for line in side) else "wall clock"
    runs = len({line.get("run", 0) for line in side})
    which = (f" Of the {runs} runs combined, each shape's row is from the latest that timed default on it." if runs > 1
             else "")
    return (f"The same generated code timed side by side (us): each mode's modules, as its fresh process generated "
            f"them, loaded into one process and timed by {how}, modes interleaved over {rounds} rounds; times are the "
            f"median over the rounds, ratios the median of the round-by-round ratios.{which}")


def markdown(results: list[dict], side: list[dict] | None = None) -> str:
    """The kernel table, the side-by-side table of the same shapes (``side``: ``side_by_side`` lines) and the
    agreement table (empty string when no line has replay times)."""
    rows = kernel_rows(results)
    lines = kernel_table(rows, _process_count(results)) if rows else []
    paired = side_rows(side) if side else []
    if paired:
        lines += ["", *kernel_table(paired, _process_count(side), side_by_side_title(side))]
        spread = identical_code_spread(results, side)
        if spread:
            lines.append(f"Two modes that generated the same code, side by side: {spread[0]:.3f}-{spread[1]:.3f}x of "
                         f"each other over {spread[2]} pairs (the timing's own noise).")
    lines += result_check.report_lines(results)
    cached = cache_rows(results)
    if cached:
        lines += cache_lines(cached)
    agreement = method_agreement(results)
    if agreement:
        n = agreement["shapes"]
        lines += ["", "Pick against the replay-fastest candidate (an independent second replay autotuning):", "",
                  "| timing method | picks that differ | regret geomean (replay) |", "| --- | ---: | ---: |",
                  f"| per call (default max-autotune) | {agreement['per_call_differs']} of {n} | "
                  f"{agreement['per_call_regret']:.3f} |",
                  f"| CUDA-graph replay (the plugin) | {agreement['replay_differs']} of {n} | "
                  f"{agreement['replay_regret']:.3f} |", "",
                  "| shape | replay-fastest | per-call pick (regret) | replay pick (regret) |", "| --- | --- | --- | --- |"]
        for r in agreement["rows"]:
            lines.append(f"| {r['shape']} | {_short(r['replay_fastest'])} | {_short(r['per_call_pick'])} "
                         f"({r['per_call_regret']:.3f}) | {_short(r['replay_pick'])} ({r['replay_regret']:.3f}) |")
    return "\n".join(lines) + ("\n" if lines else "")
