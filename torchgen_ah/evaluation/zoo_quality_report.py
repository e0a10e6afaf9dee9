"""The zoo's quality-mode report: quality mode's step and compile against max-autotune off, model by model,
with the bar that fits each model, and the same with Inductor's freezing where it was measured.

Quality mode is for users who pay compile time for a faster step, so its step bar depends on where a model
has room: a decoder at decode (small-M GEMMs streaming weights, far from the bandwidth roofline) must step
at most ``DECODE_BAR`` times off's; a decoder at prefill and an encoder at most ``PREFILL_BAR``; every other
model at most ``OTHER_BAR`` (never slower than off beyond noise). Compile at most ``COMPILE_BAR`` times off's.

``*_frozen`` modes are the same mode with ``TORCHINDUCTOR_FREEZING=1`` (constant weights: Inductor
concatenates projections that share an input and folds constants): a user's opt-in for inference, shown
beside the bar's own figures to price horizontal fusion, never as quality mode's result.
"""

from __future__ import annotations

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation import zoo_models
from torchgen_ah.evaluation.markdown_tables import cell, table
from torchgen_ah.evaluation.zoo_report import (failure_lines, method_text, result_lines, spread_cell, step_cell,
                                                summarize)

DECODE_BAR = 0.95
PREFILL_BAR = 0.98
OTHER_BAR = 1.01
COMPILE_BAR = 2.0
MODE = "quality"
EXTRA_MODES = ("quality_frozen", "off_frozen")


def step_bar(model: str) -> tuple[float, str]:
    """(bar, why) for a zoo model: decode, prefill or encoder, else any other model."""
    entry = zoo_models.ENTRIES.get(model)
    if entry is None or entry.kind != zoo_models.INFER:
        return OTHER_BAR, "other"
    if entry.phase == "decode":
        return DECODE_BAR, "decode"
    if entry.phase == "prefill" or entry.family == "encoder":
        return PREFILL_BAR, "prefill" if entry.phase == "prefill" else "encoder"
    return OTHER_BAR, "other"


def verdict(step_ratio: float | None, compile_ratio: float | None, bar: float, noise: float | None) -> str:
    if step_ratio is None or compile_ratio is None:
        return "not judged (no " + ("step" if step_ratio is None else "compile") + " measured)"
    misses = []
    if step_ratio > bar:
        within = noise is not None and step_ratio <= 1.0 + noise and bar >= 1.0
        misses.append(f"step {step_ratio:.3f}x > {bar:g}x" + (" (within off's spread)" if within else ""))
    if compile_ratio > COMPILE_BAR:
        misses.append(f"compile {compile_ratio:.2f}x > {COMPILE_BAR:g}x")
    return "missed: " + ", ".join(misses) if misses else "met"


def _cell(mode_summary: dict | None) -> str:
    if not mode_summary:
        return "-"
    return f"{cell(mode_summary['compile_ratio'], '.2f')} / {step_cell(mode_summary)} ({mode_summary['procs']})"


def main_table(summary: dict) -> tuple[list[str], list[dict]]:
    extras = [m for m in EXTRA_MODES if any(m in s["modes"] for s in summary.values())]
    header = ["model", "phase", "off compile s", "off step ms", "off spread", "procs off/quality",
              "quality compile x", "quality step x", "templates", "bar", *[f"{m} compile x / step x (procs)"
                                                                        for m in extras], "verdict"]
    body, judged = [], []
    for model, s in summary.items():
        quality = s["modes"].get(MODE)
        bar, why = step_bar(model)
        noise = s["spread"]
        cells = ["-", "-", "-"]
        judged_as = "not judged (no quality process)"
        if quality:
            cells = [cell(quality["compile_ratio"], ".2f"), step_cell(quality), str(quality["templates"])]
            judged_as = verdict(quality["step_ratio"], quality["compile_ratio"], bar, noise)
            judged.append({"model": model, "why": why, **quality, "verdict": judged_as})
        body.append([model, why, cell(s["off"]["compile_seconds"], ".1f"), cell(s["off"]["step_ms"], ".3f"),
                     spread_cell(s),
                     f"{s['off']['procs']}/{quality['procs'] if quality else 0}", *cells, f"<= {bar:g}x",
                     *[_cell(s["modes"].get(m)) for m in extras], judged_as])
    text = (0, 1, 4, 5, 7, 9, *range(10, len(header)))  # names, spread, counts, ranges, bars, cells, verdict
    return table(header, body, text_columns=text), judged


def totals(judged: list[dict]) -> list[str]:
    if not judged:
        return []
    met = sum(j["verdict"] == "met" for j in judged)
    compiles = [j["compile_ratio"] for j in judged if j["compile_ratio"] is not None]
    steps = [j["step_ratio"] for j in judged if j["step_ratio"] is not None]
    return ["", f"Quality mode met its bars on {met} of {len(judged)} models. Geomean over models: compile "
                f"{geomean(compiles):.2f}x off, step {geomean(steps):.3f}x off."]


def markdown(rows: list[dict], command: str, status: dict | None = None, note: str | None = None) -> str:
    summary = summarize(rows, estimate_compile=False)  # quality's bar is for fresh processes' compile
    lines, judged = main_table(summary)
    head = [f"Command: `{command}`", "", *([note, ""] if note else []),
            method_text(summary) + " Fresh processes per mode in brackets. Templates: Triton GEMM template kernels in "
            "quality mode's code. Bars: step <= "
            f"{DECODE_BAR:g}x off at decode, <= {PREFILL_BAR:g}x at prefill and on encoders, <= {OTHER_BAR:g}x "
            f"elsewhere; compile <= {COMPILE_BAR:g}x off. `*_frozen`: the mode with Inductor's freezing "
            "(TORCHINDUCTOR_FREEZING=1; in one process the `freezing` option): a user's opt-in for inference, "
            "constant weights, projections sharing an input concatenated; shown to price horizontal fusion."]
    return "\n".join([*head, "", *lines, *totals(judged), *result_lines(rows), *failure_lines(rows, status)]) + "\n"
