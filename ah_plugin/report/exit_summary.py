"""The one line the plugin prints at exit with ``AH_PLUGIN_VERBOSE=1``: what it did in this process.

A run where the plugin did nothing must say so (no GEMM was autotuned, no row was written), so the line
is printed even when every count is zero. It renders ``ah_plugin.status()``: inputs logged, choices kept,
results-cache hits, CPU GEMMs Inductor did not autotune.
"""

from __future__ import annotations

import atexit
import logging

from .messages import PREFIX
from .verbose_output import say

log = logging.getLogger("ah_plugin")
_registered = [False]


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def summary_line(status: dict) -> str:
    """``ah_plugin: at exit: ...`` from ``ah_plugin.status()``."""
    current = status["settings"]
    parts = [part for part in (_collect_part(status.get("collect_stats"), current.collect),
                               _use_part(status.get("use_stats"), current.use),
                               _cache_part(status.get("cache_stats"))) if part]
    reused = status.get("compile_once", {}).get("reused", 0)
    if reused:
        parts.append(f"{_plural(reused, 'kept template')} compiled once (the autotuning's binary reused)")
    groups = status.get("fused_groups", {})
    if groups.get("fused") or groups.get("apart"):
        parts.append(f"fused-group decisions by replay: {groups.get('fused', 0):,} template(s) kept fused, "
                     f"{groups.get('apart', 0):,} kept apart")
    untimed = status.get("neighbours_untimed", 0)
    if untimed:
        parts.append(f"{_plural(untimed, 'fusion neighbour')} not timed alone (no fused template to compare with)")
    skipped = status.get("cpu_gemms_not_autotuned", 0)
    if skipped:
        parts.append(f"{_plural(skipped, 'CPU GEMM')} not autotuned by Inductor (freezing off or not under no_grad)")
    off = status.get("gemms_without_max_autotune", 0)
    if off:
        parts.append(f"{_plural(off, 'GEMM')} not autotuned by Inductor (max-autotune off)")
    if not parts and status.get("waiting_for_inductor"):
        parts = ["nothing compiled (torch never imported Inductor)"]
    return PREFIX + "at exit: " + "; ".join(parts or ["nothing to do (no operation named)"])


def _collect_part(stats, ops) -> str | None:
    if stats is None:
        return None
    where = f" to {', '.join(sorted(stats.files))}" if stats.files else ""
    lost = f", {_plural(stats.rows_lost, 'row')} lost (unwritable log)" if stats.rows_lost else ""
    return (f"collect {','.join(sorted(ops))}: {_plural(stats.inputs, 'input')} logged "
            f"({_plural(stats.rows, 'row')}){where}{lost}")


def _use_part(stats, ops) -> str | None:
    if stats is None:
        return None
    unranked = f" ({stats.without_ranking:,} with no artifact to rank them: aten kept)" if stats.without_ranking else ""
    l2 = getattr(stats, "l2_aten", 0)
    l2_part = f" ({l2:,} memory-bound within L2: aten kept)" if l2 else ""
    unbacked = getattr(stats, "unbacked", 0)
    l2_part += (f" ({unbacked:,} ranked a template first without training data to back it: not kept alone, and "
                "on a CPU, or with AH_PLUGIN_TIME_UNBACKED=off, not compiled)" if unbacked else "")
    unpadded = getattr(stats, "unpadded", 0)
    pad_part = f"; {_plural(unpadded, 'GEMM')} left unpadded (a template ranked first either way)" if unpadded else ""
    return (f"use {','.join(sorted(ops))}: kept {stats.kept:,} of {stats.offered:,} choices in "
            f"{_plural(stats.autotunings, 'autotuning')}{unranked}{l2_part}{pad_part}")


def _cache_part(stats) -> str | None:
    if stats is None:
        return None
    untimed = stats.get("untimed", 0)
    said = (f" ({untimed:,} left with one choice, by the USE ranking: nothing timed, so nothing recorded)"
            if untimed else "")
    return (f"results cache: {_plural(stats.get('hits', 0), 'hit')}, "
            f"{_plural(stats.get('misses', 0), 'miss', 'misses')}, {stats.get('tuned', 0):,} tuned{said}")


def _print_summary(status_of) -> None:
    try:
        status = status_of()
        if status["settings"].verbose:
            say(log, summary_line(status))
    except Exception:  # at exit: never turn a clean exit into a traceback
        pass


def register_if_verbose(status_of) -> None:
    """Print the summary at exit (once per process) when verbose output is on now. ``status_of``:
    ``ah_plugin.status``, handed in by the package (this module stays below it: no import circle)."""
    if _registered[0]:
        return
    from ..config import settings

    if settings.current().verbose:
        _registered[0] = True
        atexit.register(_print_summary, status_of)
