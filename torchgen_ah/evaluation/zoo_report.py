"""The zoo's report: per model, max-autotune off's compile and step, every other mode as a ratio to off's,
whether it generated off's code, and fast mode's verdict against its bars.

Off's reference is the median over every process that ran off's code (``off`` and its control
``off_again``); the identical-code spread is the range of those processes' step times (max/min - 1): two
processes running the same kernels step that far apart, so a step ratio inside it is not a measured
difference. Where fast mode generated exactly off's code (hash equal), its step cannot differ from off's but
by that noise: the step bar is met by construction, and said so.
"""

from __future__ import annotations

import math
import statistics

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.markdown_tables import table
from torchgen_ah.evaluation.result_check import WRONG_ABOVE

COMPILE_BAR = 1.3  # fast mode: compile at most this multiple of max-autotune off's
STEP_BAR = 1.01  # fast mode: step at most this multiple of off's
OFF_MODES = ("off", "off_again")


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _same_code(rows: list[dict], off_rows: list[dict]) -> str:
    """yes / no against off's one hash; 'off varies' when off's own processes differ; '-' without hashes."""
    off_codes = {r.get("code") for r in off_rows}
    codes = {r.get("code") for r in rows}
    if None in off_codes or None in codes:
        return "-"
    if len(off_codes) > 1:
        return "off varies"
    return "yes" if codes == off_codes else "no"


def spread(off_rows: list[dict]) -> float | None:
    """max/min - 1 of the step times of the processes that ran off's code; None with fewer than two."""
    steps = [r["step_ms"] for r in off_rows]
    return max(steps) / min(steps) - 1 if len(steps) > 1 else None


def verdict(compile_ratio: float, step_ratio: float, same_code: str, noise: float | None) -> str:
    """Fast mode against its bars; a step miss within the identical-code spread is named as such."""
    misses = []
    if compile_ratio > COMPILE_BAR:
        misses.append(f"compile {compile_ratio:.2f}x")
    if step_ratio > STEP_BAR and same_code != "yes":
        within = noise is not None and step_ratio - 1 <= noise
        misses.append(f"step {step_ratio:.3f}x" + (" (within the identical-code spread)" if within else ""))
    if misses:
        return "missed: " + ", ".join(misses)
    return "met (off's code)" if same_code == "yes" and step_ratio > STEP_BAR else "met"


def summarize(rows: list[dict]) -> dict:
    """{model: {"kind", "off": {...}, "spread", "modes": {mode: {...}}}} over the measured rows (those with a
    step time); models without an off process are left out (nothing to compare with)."""
    by_model: dict = {}
    for r in rows:
        if "step_ms" in r:
            by_model.setdefault(r["model"], []).append(r)
    out = {}
    for model, measured in by_model.items():
        off_rows = [r for r in measured if r["mode"] in OFF_MODES]
        if not off_rows:
            continue
        off = {"compile_seconds": _median(off_rows, "compile_seconds"), "step_ms": _median(off_rows, "step_ms"),
               "procs": len(off_rows), "compiles": max(len(r.get("compile_calls", [1])) for r in off_rows)}
        modes = {}
        for mode in dict.fromkeys(r["mode"] for r in measured if r["mode"] not in OFF_MODES):
            mine = [r for r in measured if r["mode"] == mode]
            modes[mode] = {"compile_ratio": _median(mine, "compile_seconds") / off["compile_seconds"],
                           "step_ratio": _median(mine, "step_ms") / off["step_ms"], "procs": len(mine),
                           "same_code": _same_code(mine, off_rows),
                           "templates": max(r.get("code_summary", {}).get("templates", 0) for r in mine)}
        out[model] = {"kind": measured[0].get("kind", "infer"), "off": off, "spread": spread(off_rows),
                      "modes": modes, "by_batch": _by_batch(measured)}
    return out


def _by_batch(measured: list[dict]) -> dict:
    """{batch: {mode: median ms}} of a serving row set (off's code: off and off_again together)."""
    out: dict = {}
    for r in measured:
        for batch, ms in (r.get("step_ms_by_batch") or {}).items():
            mode = "off" if r["mode"] in OFF_MODES else r["mode"]
            out.setdefault(batch, {}).setdefault(mode, []).append(ms)
    return {b: {m: statistics.median(v) for m, v in modes.items()} for b, modes in out.items()}


def _ratio_cell(mode_summary: dict | None) -> str:
    if not mode_summary:
        return "-"
    return f"{mode_summary['compile_ratio']:.2f} / {mode_summary['step_ratio']:.3f}"


def main_table(summary: dict) -> list[str]:
    others = list(dict.fromkeys(m for s in summary.values() for m in s["modes"] if m != "fast"))
    header = ["model", "kind", "off compile s", "off step ms", "spread", "procs off/fast", "fast compile x",
              "fast step x", "fast = off code", "fast templates", *[f"{m} compile x / step x" for m in others],
              "verdict"]
    rows = []
    for model, s in summary.items():
        off, fast, noise = s["off"], s["modes"].get("fast"), s["spread"]
        kind = s["kind"] + (f" ({off['compiles']} compiles)" if off["compiles"] > 1 else "")
        fast_cells = ["-"] * 4
        judged = "not judged (no fast process)"
        if fast:
            fast_cells = [f"{fast['compile_ratio']:.2f}", f"{fast['step_ratio']:.3f}", fast["same_code"],
                          str(fast["templates"])]
            judged = verdict(fast["compile_ratio"], fast["step_ratio"], fast["same_code"], noise)
        rows.append([model, kind, f"{off['compile_seconds']:.1f}", f"{off['step_ms']:.3f}",
                     "-" if noise is None else f"{noise:.1%}", f"{off['procs']}/{fast['procs'] if fast else 0}",
                     *fast_cells, *[_ratio_cell(s["modes"].get(m)) for m in others], judged])
    text = (0, 1, 5, 8, *range(10, len(header)))  # names, counts "a/b", yes/no, "x / y" cells, the verdict
    return table(header, rows, text_columns=text)


def serving_lines(summary: dict) -> list[str]:
    out = []
    for model, s in summary.items():
        if not s["by_batch"]:
            continue
        modes = [m for m in s["modes"]]
        rows = []
        for batch, times in s["by_batch"].items():
            off = times.get("off")
            rows.append([batch, "-" if off is None else f"{off:.3f}",
                         *["-" if off is None or m not in times else f"{times[m] / off:.3f}" for m in modes]])
        out += ["", f"{model}, step per batch size (in the order called; off's ms, the other modes as x off's):", "",
                *table(["batch", "off ms", *[f"{m} x" for m in modes]], rows)]
    return out


def failure_lines(rows: list[dict], status: dict | None) -> list[str]:
    """Models not built, processes that raised, runs that did not finish."""
    out = []
    skipped = {r["model"]: r["skipped"] for r in rows if "skipped" in r}
    if skipped:
        out.append("Not built (skipped): " + "; ".join(f"{m} ({why})" for m, why in skipped.items()) + ".")
    failed = [f"{r['model']} {r['mode']} ({r['failed']})" for r in rows if "failed" in r]
    if failed:
        out.append("Failed: " + "; ".join(failed) + ".")
    unfinished = {k: v for k, v in (status or {}).items() if v != "ok"}
    if unfinished:
        out.append("Processes that did not finish: " + ", ".join(f"{k}: {v}" for k, v in unfinished.items()) + ".")
    return ["", *out] if out else []


def result_lines(rows: list[dict]) -> list[str]:
    """The results against eager: the largest error, and each (model, mode) above ``WRONG_ABOVE`` beside off's."""
    checked = [r for r in rows if r.get("result_error") is not None]
    if not checked:
        return []
    worst = max(checked, key=lambda r: r["result_error"])
    off_error = {}
    for r in checked:
        if r["mode"] in OFF_MODES:
            off_error[r["model"]] = max(off_error.get(r["model"], 0.0), r["result_error"])
    wrong = [r for r in checked if r["result_error"] > WRONG_ABOVE]
    unchecked = sum(r.get("unchecked", 0) for r in rows)
    text = (f"Results against eager PyTorch ({len(checked)} processes): largest relative error "
            f"{worst['result_error']:.1e} ({worst['model']}, {worst['mode']}); ")
    if wrong:
        text += f"above {WRONG_ABOVE:g}: " + ", ".join(
            f"{r['model']} {r['mode']} {r['result_error']:.2g} (off's code: {off_error.get(r['model'], math.nan):.2g})"
            for r in wrong) + "."
    else:
        text += f"none above {WRONG_ABOVE:g}."
    if unchecked:
        text += f" {unchecked} results could not be checked (see the processes' logs)."
    return ["", text]


def totals_line(summary: dict) -> list[str]:
    judged = {m: s["modes"]["fast"] for m, s in summary.items() if "fast" in s["modes"]}
    if not judged:
        return []
    met = sum(verdict(f["compile_ratio"], f["step_ratio"], f["same_code"], summary[m]["spread"]).startswith("met")
              for m, f in judged.items())
    same = sum(f["same_code"] == "yes" for f in judged.values())
    return ["", f"Fast mode met both bars on {met} of {len(judged)} models; it generated off's code on {same}. "
                f"Geomean over models: compile {geomean([f['compile_ratio'] for f in judged.values()]):.2f}x off, "
                f"step {geomean([f['step_ratio'] for f in judged.values()]):.3f}x off."]


def markdown(rows: list[dict], command: str, status: dict | None = None, note: str | None = None) -> str:
    summary = summarize(rows)
    lines = [f"Command: `{command}`", "", *([note, ""] if note else []),
             "Each (model, mode) in a fresh process with fresh caches. Off = max-autotune off; its compile and step "
             "are medians over its processes (`off` and the control `off_again`), the other modes' medians are given "
             "as multiples of off's (compile x / step x). Compile = wall seconds of every call that compiled "
             "(recompiles and a lazily compiled backward included); step = ms per call, the median of timed windows "
             "of back-to-back calls (CUDA-graph replays on a GPU; serving: the geometric mean over its batch sizes). "
             "Spread = range of step times among the processes that ran off's code (max/min - 1). Fast = off code: "
             "the generated code's hash equals off's. Templates: Triton GEMM template kernels in the generated code "
             f"(0: every GEMM kept aten). Bars: fast compile <= {COMPILE_BAR}x off, step <= {STEP_BAR}x off.", "",
             *main_table(summary), *totals_line(summary), *serving_lines(summary), *result_lines(rows),
             *failure_lines(rows, status)]
    return "\n".join(lines) + "\n"
