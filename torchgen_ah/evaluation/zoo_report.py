"""The zoo's report: per model, max-autotune off's compile and step, every other mode as a ratio to off's,
whether it generated off's code, and fast mode's verdict against its bars.

Compile is a fresh-process wall time, off's the median over every process that ran off's code (``off`` and its
control ``off_again``); with ``--compile one_process`` (no process per mode) off's is its compile in the
one-process judging, where it is compiled first with fresh caches. Steps come from the process that judged a model's modes together (``zoo_one_process``:
each mode compiled in its own plugin scope, windows interleaved), where the run had one: a mode's ratio to off
in that process, the range of its per-round ratios, and the A/A control (off compiled once more there) as the
spread. Otherwise they are medians of the modes' own processes, and the spread is the range of off's
processes' step times (max/min - 1): fresh processes running the same kernels step that far apart, so a step
ratio inside it is not a measured difference. Where fast mode generated exactly off's code (hash equal), its
step cannot differ from off's but by noise: the step bar is met by construction, and said so.

Fresh processes compile the same code far apart too (two off processes of one FlexAttention model: 6.6 and
9.0 s on an H100), so where the one-process judging compiled the modes with Inductor's whole-graph cache off,
a mode's compile ratio is estimated there: (off's fresh compile + the mode's shared-process seconds - the
control's) / off's fresh compile. In that process every mode compiles its kernels cold, in caches of its own
(``own_kernel_caches``; rows written before found off's kernels compiled, as the control did, and a mode that
keeps templates, which renumber the kernels after them, recompiled kernels the control found); the estimate is
taken where the control came after off, for every mode after off (for the first one only in the older rows, where
a later mode found the earlier modes' kernels compiled too). The process warms compile by compile: with the control last the estimate leans against the
mode, with the control first (odd repetitions, ``one_process_order``) for it. The fresh-process ratio is shown
beside it where it ran. The quality report (``zoo_quality_report``) keeps fresh ratios.
"""

from __future__ import annotations

import math
import statistics

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation import one_process, own_kernel_caches, zoo_models
from torchgen_ah.evaluation.markdown_tables import cell, table
from torchgen_ah.evaluation.result_check import WRONG_ABOVE

COMPILE_BAR = 1.3  # fast mode: compile at most this multiple of max-autotune off's, from fresh processes
ONE_PROCESS_COMPILE_BAR = 1.1  # the same, estimated in one process (the mode's own seconds over the control's)
STEP_BAR = 1.01  # fast mode: step at most this multiple of off's, steps of fresh processes
ONE_PROCESS_STEP_BAR = 1.005  # the same, steps judged in one process (0.1-0.3% apart for the same code)
OFF_MODES = ("off", "off_again")
ONE_PROCESS_SOURCE, FRESH_SOURCE = "one process", "fresh processes"


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _same_code(rows: list[dict], off_rows: list[dict]) -> str:
    """yes / no against off's one hash; 'off varies' when off's own processes differ; '-' without hashes."""
    off_codes = {r.get("code") for r in off_rows}
    codes = {r.get("code") for r in rows}
    if not rows or not off_rows or None in off_codes or None in codes:
        return "-"
    if len(off_codes) > 1:
        return "off varies"
    return "yes" if codes == off_codes else "no"


def spread(off_rows: list[dict]) -> float | None:
    """max/min - 1 of the step times of the processes that ran off's code; None with fewer than two."""
    steps = [r["step_ms"] for r in off_rows]
    return max(steps) / min(steps) - 1 if len(steps) > 1 else None


def one_process_steps(judged: list[dict]) -> dict:
    """{mode: {"step_ms", "step_ratio", "low", "high"}} from the rows of the processes that judged a model's
    steps in one process (``zoo_one_process``): per mode the median over those processes of its step and of
    its ratio to off's in the same process, and the range of its per-round ratios over all of them."""
    per_mode: dict = {}
    for row in judged:
        for mode in row["modes"]:
            ratio = one_process.step_ratio(row["windows_ms"], mode, "off")
            per_mode.setdefault(mode, []).append({"step_ms": row["steps"][mode]["step_ms"], **ratio})
    return {mode: {"step_ms": _median(found, "step_ms"), "step_ratio": _median(found, "ratio"),
                   "low": min(f["low"] for f in found), "high": max(f["high"] for f in found)}
            for mode, found in per_mode.items()}


def one_process_compile(judged: list[dict]) -> dict:
    """{mode: median seconds the mode's compile took over the control's (``off_again``)} from the one-process
    rows compiled without the whole-graph cache, where the control too came after off: for every mode after
    off where each compiled its kernels in caches of its own, else (older rows) for the modes compiled after
    off with no other mode between but off's twins (each then found off's kernels compiled and nothing else).

    A process grows warmer compile by compile (gpt2 on an H200: fast 1.16x off's compile estimated with
    fast second and the control third, while fast took 0.97x the control's seconds compiled after it), so
    the mode's place decides which way the estimate leans: second, against the mode; after the control, for
    it. The zoo's repetitions alternate the two places (``one_process_order``); over both the median of two
    is their mean, in which a steady warming cancels."""
    return {mode: statistics.median(seconds for seconds, _ in found) for mode, found in _estimates(judged).items()}


def compile_orders(judged: list[dict]) -> dict:
    """{mode: the places its one-process estimates came from}: ``AGAINST`` (compiled right after off, the
    control later) and ``FOR`` (after the control). One place alone leans that way (``one_process_compile``)."""
    return {mode: {place for _, place in found} for mode, found in _estimates(judged).items()}


AGAINST, FOR = "against", "for"  # a mode's place in the one process: right after off, or after the control


def _estimates(judged: list[dict]) -> dict:
    """{mode: [(its compile seconds minus the control's, AGAINST or FOR)]} over ``one_process_compile``'s rows:
    the first mode after off, or, where every mode compiled its kernels in caches of its own (none finds
    another's kernels), each mode after off."""
    extra: dict = {}
    for row in judged:
        order = row["modes"]
        if row.get("whole_graph_cache", True) or "off_again" not in row["steps"] or "off" not in order:
            continue
        first = order.index("off")
        control_at = order.index("off_again")
        if control_at < first:
            continue
        control = row["steps"]["off_again"]["compile_seconds_shared"]
        every = row.get(own_kernel_caches.ROW_FIELD) == own_kernel_caches.PER_MODE
        for at, mode in enumerate(order[first + 1:], start=first + 1):
            if mode in OFF_MODES:
                continue
            place = FOR if control_at < at else AGAINST
            extra.setdefault(mode, []).append((row["steps"][mode]["compile_seconds_shared"] - control, place))
            if not every:
                break
    return extra


def one_process_order(modes: list[str], rep: int) -> list[str]:
    """The order the one-process judging of repetition ``rep`` compiles ``modes`` in: as given in even
    repetitions; in odd ones the control ``off_again`` moved right after off, so the mode that followed off
    follows the control (``one_process_compile``: the two places lean opposite ways)."""
    if rep % 2 == 0 or "off" not in modes or "off_again" not in modes:
        return list(modes)
    rest = [m for m in modes if m != "off_again"]
    at = rest.index("off") + 1
    return rest[:at] + ["off_again"] + rest[at:]


def first_compiles(judged: list[dict]) -> list[float]:
    """Off's compile seconds in the one-process rows that compiled off first, with Inductor's whole-graph cache
    off: the process's first compile, with fresh caches, is what a fresh process of off compiles (``--compile
    one_process``, where the zoo runs no process per mode)."""
    return [r["steps"]["off"]["compile_seconds_shared"] for r in judged
            if not r.get("whole_graph_cache", True) and r["modes"][:1] == ["off"]
            and "compile_seconds_shared" in r["steps"]["off"]]


def mode_code_rows(judged: list[dict], modes: tuple) -> list[dict]:
    """Rows shaped as a mode's own process's (``code``, ``code_summary``) for ``modes``, from the one-process
    rows: where no process per mode ran, same-code and templates are read there."""
    return [{"mode": mode, "code": r["steps"][mode].get("code"), "code_summary": r["steps"][mode].get("code_summary", {})}
            for r in judged for mode in modes if mode in r["steps"]]


def compile_bar(mode_summary: dict) -> float:
    return ONE_PROCESS_COMPILE_BAR if mode_summary.get("compile_source") == ONE_PROCESS_SOURCE else COMPILE_BAR


def step_bar(summary: dict) -> float:
    return ONE_PROCESS_STEP_BAR if summary["step_source"] == ONE_PROCESS_SOURCE else STEP_BAR


def verdict(compile_ratio: float | None, step_ratio: float | None, same_code: str, noise: float | None,
            bar: float = STEP_BAR, compile_limit: float = COMPILE_BAR) -> str:
    """Fast mode against its bars; a step miss within the identical-code spread is named as such."""
    if compile_ratio is None or step_ratio is None:
        return "not judged (no " + ("compile" if compile_ratio is None else "step") + " measured)"
    misses = []
    if compile_ratio > compile_limit:
        misses.append(f"compile {compile_ratio:.2f}x")
    if step_ratio > bar and same_code != "yes":
        within = noise is not None and step_ratio - 1 <= noise
        misses.append(f"step {step_ratio:.3f}x" + (" (within the identical-code spread)" if within else ""))
    if misses:
        return "missed: " + ", ".join(misses)
    return "met (off's code)" if same_code == "yes" and step_ratio > bar else "met"


def summarize(rows: list[dict], estimate_compile: bool = True) -> dict:
    """{model: {"kind", "off": {...}, "spread", "step_source", "modes": {mode: {...}}, "by_batch"}}. Compile
    from the modes' fresh processes, estimated in the one process where it can be (``one_process_compile``;
    not with ``estimate_compile`` false); step from the one-process judging where a model has it (``spread``: off
    compiled again in that process, the A/A control, its ratio's distance from 1), else from the fresh
    processes' medians (``spread``: the range of off's processes). Models with neither an off process nor a
    one-process judging are left out (nothing to compare with)."""
    by_model: dict = {}
    for r in rows:
        if "compile_seconds" in r or "steps" in r:
            by_model.setdefault(r["model"], []).append(r)
    out = {}
    for model, measured in by_model.items():
        fresh = [r for r in measured if "compile_seconds" in r]
        off_rows = [r for r in fresh if r["mode"] in OFF_MODES]
        judged = [r for r in measured if "steps" in r]
        one = one_process_steps(judged)
        extra = one_process_compile(judged) if estimate_compile else {}
        orders = compile_orders(judged) if estimate_compile else {}
        timed_off = [r for r in off_rows if "step_ms" in r]
        if not off_rows and not one:
            continue
        off_step = one["off"]["step_ms"] if one else _median(timed_off, "step_ms") if timed_off else None
        first_off = [] if off_rows else first_compiles(judged)
        off_compile = _median(off_rows, "compile_seconds") if off_rows else \
            statistics.median(first_off) if first_off else None
        calls = [len(r.get("compile_calls", [1])) for r in off_rows] or \
            [len(r["steps"]["off"].get("compile_calls", [1])) for r in judged if "off" in r["steps"]]
        off = {"compile_seconds": off_compile, "step_ms": off_step, "procs": len(off_rows),
               "compile_source": ONE_PROCESS_SOURCE if first_off else FRESH_SOURCE,
               "compiles": max(calls, default=1)}
        modes = {}
        for mode in dict.fromkeys([r["mode"] for r in fresh] + list(one)):
            if mode in OFF_MODES:
                continue
            mine = [r for r in fresh if r["mode"] == mode]
            fresh_ratio = _median(mine, "compile_seconds") / off["compile_seconds"] if mine and off_rows else None
            estimated = (off["compile_seconds"] + extra[mode]) / off["compile_seconds"] \
                if mode in extra and off["compile_seconds"] else None
            # hashes compared within one kind of process (the same code hashes apart across the two kinds)
            coded, code_rows = (mine, off_rows) if mine and off_rows else \
                (mode_code_rows(judged, (mode,)), mode_code_rows(judged, OFF_MODES))
            modes[mode] = {"compile_ratio": fresh_ratio if estimated is None else estimated,
                           "fresh_compile_ratio": fresh_ratio,
                           "compile_source": FRESH_SOURCE if estimated is None else ONE_PROCESS_SOURCE,
                           "compile_orders": orders.get(mode, set()) if estimated is not None else set(),
                           "procs": len(mine), "same_code": _same_code(coded, code_rows),
                           "templates": max((r.get("code_summary", {}).get("templates", 0) for r in coded), default=0),
                           **_step_of(mode, mine, one, off_step)}
        aa = one.get("off_again")
        out[model] = {"kind": measured[0].get("kind", "infer"), "off": off, "modes": modes,
                      "step_source": ONE_PROCESS_SOURCE if one else FRESH_SOURCE,
                      "spread": (abs(aa["step_ratio"] - 1) if aa else None) if one else
                      (spread(timed_off) if timed_off else None), "by_batch": _by_batch(measured, bool(one))}
    return out


def _step_of(mode: str, fresh: list[dict], one: dict, off_step: float | None) -> dict:
    """A mode's step ratio to off's: from one process (with its per-round range), else from the medians of
    fresh processes that timed steps; None where neither measured it."""
    if one:
        found = one.get(mode)
        return {"step_ratio": found["step_ratio"], "step_range": (found["low"], found["high"])} if found else \
            {"step_ratio": None, "step_range": None}
    timed = [r for r in fresh if "step_ms" in r]
    ratio = _median(timed, "step_ms") / off_step if timed and off_step else None
    return {"step_ratio": ratio, "step_range": None}


def _by_batch(measured: list[dict], one: bool) -> dict:
    """{batch: {mode: median ms}} of a serving row set: from the one-process judging when ``one`` (off its
    own compile), else from fresh processes (off's code: off and off_again together)."""
    out: dict = {}
    if one:
        for r in (r for r in measured if "steps" in r):
            for mode, fields in r["steps"].items():
                for batch, ms in (fields.get("step_ms_by_batch") or {}).items():
                    out.setdefault(batch, {}).setdefault(mode, []).append(ms)
    else:
        for r in measured:
            for batch, ms in (r.get("step_ms_by_batch") or {}).items():
                mode = "off" if r["mode"] in OFF_MODES else r["mode"]
                out.setdefault(batch, {}).setdefault(mode, []).append(ms)
    return {b: {m: statistics.median(v) for m, v in modes.items()} for b, modes in out.items()}


def step_cell(mode_summary: dict) -> str:
    """A mode's step ratio, with the range of its per-round ratios where it was judged in one process."""
    ratio, span = mode_summary["step_ratio"], mode_summary["step_range"]
    if ratio is None:
        return "-"
    return f"{ratio:.3f}" + (f" ({span[0]:.3f}-{span[1]:.3f})" if span else "")


def spread_cell(summary: dict) -> str:
    if summary["spread"] is None:
        return "-"
    return ("A/A " if summary["step_source"] == ONE_PROCESS_SOURCE else "") + f"{summary['spread']:.1%}"


def compile_cell(mode_summary: dict) -> str:
    """A mode's compile ratio; in brackets, which way an estimate from one place in the process leans and,
    where it was estimated in one process, the fresh processes' ratio."""
    notes = []
    if len(mode_summary.get("compile_orders", ())) == 1:  # one place only: the estimate leans that way
        notes.append(f"leans {next(iter(mode_summary['compile_orders']))}")
    if mode_summary.get("compile_source") == ONE_PROCESS_SOURCE and mode_summary["fresh_compile_ratio"] is not None:
        notes.append(f"fresh {mode_summary['fresh_compile_ratio']:.2f}")
    return cell(mode_summary["compile_ratio"], ".2f") + (f" ({'; '.join(notes)})" if notes else "")


def _ratio_cell(mode_summary: dict | None) -> str:
    if not mode_summary:
        return "-"
    return f"{compile_cell(mode_summary)} / {step_cell(mode_summary)}"


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
            fast_cells = [compile_cell(fast), step_cell(fast), fast["same_code"], str(fast["templates"])]
            judged = verdict(fast["compile_ratio"], fast["step_ratio"], fast["same_code"], noise, step_bar(s),
                             compile_bar(fast))
        rows.append([model, kind, cell(off["compile_seconds"], ".1f"), cell(off["step_ms"], ".3f"), spread_cell(s),
                     "one" if off["compile_source"] == ONE_PROCESS_SOURCE and not (fast and fast["procs"]) else
                     f"{off['procs']}/{fast['procs'] if fast else 0}",
                     *fast_cells, *[_ratio_cell(s["modes"].get(m)) for m in others], judged])
    text = (0, 1, 4, 5, 7, 8, *range(10, len(header)))  # names, counts "a/b", ranges, yes/no, "x / y", verdict
    return table(header, rows, text_columns=text)


def serving_lines(summary: dict) -> list[str]:
    """Per served model, one line: each batch size in the order called, off's ms and every other mode as x off's."""
    out = []
    for model, s in summary.items():
        if not s["by_batch"]:
            continue
        modes = [m for m in dict.fromkeys(m for times in s["by_batch"].values() for m in times) if m != "off"]
        parts = []
        for batch, times in s["by_batch"].items():
            off = times.get("off")
            ratios = ", ".join(f"{m} {'-' if off is None or m not in times else f'{times[m] / off:.3f}'}" for m in modes)
            parts.append(f"{batch}: {'-' if off is None else f'{off:.3f} ms'}" + (f", {ratios}" if ratios else ""))
        out += ["", f"{model}, step per batch size in the order called (off's ms, the other modes as x off's): "
                + "; ".join(parts) + "."]
    return out


def decode_lines(summary: dict) -> list[str]:
    """Tokens per second of the models whose step decodes one token per sequence (batch / step time)."""
    decoding = {m: s for m, s in summary.items() if m in zoo_models.ENTRIES and s["off"]["step_ms"]
                and zoo_models.ENTRIES[m].phase == "decode" and zoo_models.ENTRIES[m].kind == zoo_models.INFER}
    if not decoding:
        return []
    modes = list(dict.fromkeys(m for s in decoding.values() for m in s["modes"]))
    rows = []
    for model, s in decoding.items():
        batch = zoo_models.ENTRIES[model].batch
        off = batch / s["off"]["step_ms"] * 1000
        rows.append([model, str(batch), f"{off:.0f}", *[
            cell(off / s["modes"][m]["step_ratio"] if m in s["modes"] and s["modes"][m]["step_ratio"] else None, ".0f")
            for m in modes]])
    return ["", "Decoding, one token per sequence per step: tokens/s = batch / step time.", "",
            *table(["model", "batch", "off tokens/s", *[f"{m} tokens/s" for m in modes]], rows)]


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
    met = sum(verdict(f["compile_ratio"], f["step_ratio"], f["same_code"], summary[m]["spread"],
                      step_bar(summary[m]), compile_bar(f)).startswith("met") for m, f in judged.items())
    same = sum(f["same_code"] == "yes" for f in judged.values())
    compiles = [f["compile_ratio"] for f in judged.values() if f["compile_ratio"] is not None]
    steps = [f["step_ratio"] for f in judged.values() if f["step_ratio"] is not None]
    return ["", f"Fast mode met both bars on {met} of {len(judged)} models; it generated off's code on {same}. "
                f"Geomean over models: compile {geomean(compiles):.2f}x off, step {geomean(steps):.3f}x off."]


def kernel_caches(rows: list[dict]) -> set:
    """How the one-process rows' modes met each other's kernels: ``per_mode`` (each compiled its kernels cold,
    ``own_kernel_caches``), ``shared`` (rows written before: a mode found the kernels earlier modes compiled)."""
    return {row.get(own_kernel_caches.ROW_FIELD, "shared") for row in rows if "windows_ms" in row}


def method_text(summary: dict, caches: set = frozenset()) -> str:
    """How a zoo table's compile and step were measured, the step said per source (one process, fresh
    processes); ``caches``: ``kernel_caches`` of the rows."""
    sources = {s["step_source"] for s in summary.values()}
    offs = {s["off"].get("compile_source") for s in summary.values()}
    text = "Compile: the wall seconds of every call that compiled (recompiles and a lazily compiled backward included)"
    if FRESH_SOURCE in offs:
        text += ("; " + ("where procs gives counts, " if ONE_PROCESS_SOURCE in offs else "") +
                 "each (model, mode) in a fresh process with fresh caches, off's the median over its processes "
                 "(`off` and the control `off_again`)")
    text += "; the other modes as multiples of off's (compile x / step x). "
    if ONE_PROCESS_SOURCE in sources:
        text += ("Step, where the spread reads A/A: every mode of the model compiled in one more fresh process, each "
                 "inside its own plugin scope with options made distinct (so Dynamo compiles it afresh), then timed "
                 "there with interleaved windows (rounds of one window of back-to-back calls per mode, the order "
                 "rotating; CUDA-graph replays on a GPU): step x = the mode's median window over off's in that "
                 "process, in brackets the range of its per-round ratios; spread = A/A, off compiled once more in "
                 "that process (`off_again`), its ratio's distance from 1. ")
    if FRESH_SOURCE in sources:
        text += ("Step, elsewhere: ms per call, the median of timed windows of back-to-back calls in each mode's own "
                 "process, medians over processes; spread = range of step times among the processes that ran off's "
                 "code (max/min - 1). ")
    if any(s["off"].get("compile_source") == ONE_PROCESS_SOURCE for s in summary.values()):
        text += ("Where procs reads one, no process per mode ran (`--compile one_process`): off's compile is its "
                 "compile in the one process, compiled first there with fresh caches as a fresh process of off "
                 "compiles, and fast = off code and templates are read there too. ")
    if any(m.get("compile_source") == ONE_PROCESS_SOURCE for s in summary.values() for m in s["modes"].values()):
        if caches == {own_kernel_caches.PER_MODE}:
            found = "compiled every kernel cold, in Inductor and Triton caches of its own, as the control did"
        elif own_kernel_caches.PER_MODE in caches:
            found = ("compiled every kernel cold in caches of its own (rows with `kernel_caches` `per_mode`) or "
                     "found off's kernels compiled (the other rows; a kept template renumbers the kernels after "
                     "it, which the mode then recompiled and the control did not: those estimates lean against "
                     "a mode that keeps templates)")
        else:
            found = ("found off's kernels compiled, as the control did (a kept template renumbers the kernels "
                     "after it, which the mode then recompiled and the control did not: the estimate leans "
                     "against a mode that keeps templates)")
        text += ("Compile x, estimated in the one process (the fresh processes' ratio in brackets where they ran), "
                 f"where every mode lowered its graph anew (Inductor's whole-graph cache off) and {found}: "
                 "(off's compile + the mode's seconds there - `off_again`'s) / off's compile, the median over "
                 "repetitions; bar "
                 f"{ONE_PROCESS_COMPILE_BAR}x. The process warms compile by compile: where the mode was compiled "
                 "right after off and the control last, the estimate leans against the mode; odd repetitions "
                 "compile the control first, leaning for it, and two repetitions give the mean of both (the "
                 "median of more leans to the first order); an estimate from one place only says which way it "
                 "leans. ")
    return text + "Serving: the geometric mean over its batch sizes."


def markdown(rows: list[dict], command: str, status: dict | None = None, note: str | None = None) -> str:
    summary = summarize(rows)
    method = (method_text(summary, kernel_caches(rows)) + " Fast = off code: the generated code's hash equals off's. Templates: Triton GEMM "
              "template kernels in the generated code (0: every GEMM kept aten). Bars: fast compile <= "
              f"{COMPILE_BAR}x off from fresh processes ({ONE_PROCESS_COMPILE_BAR}x estimated in one process), step <= {ONE_PROCESS_STEP_BAR}x off judged in one process, <= {STEP_BAR}x from "
              "fresh processes.")
    lines = [f"Command: `{command}`", "", *([note, ""] if note else []), method, "",
             *main_table(summary), *totals_line(summary), *serving_lines(summary), *decode_lines(summary),
             *result_lines(rows), *failure_lines(rows, status)]
    return "\n".join(lines) + "\n"
