"""The rule that keeps a compiled GEMM never slower than aten: a template wins only by a margin.

Replay times of one kernel move by about a percent between measurements, so a template measured
within that noise of aten (cuBLAS) is as likely to be slower as faster in the model; aten also costs no
compile. A template therefore replaces aten only when its time times ``1 + margin`` is still below
aten's (``AH_PLUGIN_ATEN_MARGIN``, default in ``settings``). Plain data: the Inductor adapter applies it
to the timings Inductor picks from, and the results cache records the same winner.

The baseline is what max-autotune off runs (``baseline``): aten for a GEMM; for a FlexAttention kernel, which
has no aten candidate, off's default config, so a ranked config replaces it only by the same margin.
"""

from __future__ import annotations

from . import flex_ranking


def _is_aten(choice_id: str) -> bool:
    return choice_id.startswith("extern_")


def baseline(op_name: str, ids, context: dict | None = None) -> set:
    """The ids among ``ids`` of what max-autotune off runs: the aten (extern) kernels of a GEMM; off's default
    config of a FlexAttention kernel, as its lowering noted it in ``context`` (empty where it did not: no
    margin then, the fastest is picked)."""
    if flex_ranking.is_flex_op(op_name):
        off = flex_ranking.off_config(op_name, context or {})
        return {off} & set(ids) if off else set()
    return {c for c in ids if _is_aten(c)}


def floor_time(timings: dict[str, float], aten: set | None = None) -> float:
    """A time just above the fastest aten candidate's (what a losing template's time is raised to)."""
    aten = aten if aten is not None else {c for c in timings if _is_aten(c)}
    return min(timings[c] for c in aten if c in timings) * (1.0 + 1e-6)


def losing_templates(timings: dict[str, float], aten: set | None = None, margin: float = 0.0) -> set:
    """Template ids whose time does not beat the fastest aten candidate's by ``margin``; empty when no
    aten candidate was timed (nothing to compare with)."""
    aten = aten if aten is not None else {c for c in timings if _is_aten(c)}
    aten_times = [timings[c] for c in aten if c in timings]
    if not aten_times:
        return set()
    best_aten = min(aten_times)
    return {c for c, t in timings.items() if c not in aten and t * (1.0 + margin) >= best_aten}


def winner(timings: dict[str, float], margin: float = 0.0, aten: set | None = None) -> str | None:
    """The candidate the rule picks: the fastest template that beats aten (or the ``aten`` ids given, e.g.
    ``baseline``'s) by ``margin``, else aten."""
    if not timings:
        return None
    losers = losing_templates(timings, aten, margin)
    eligible = {c: t for c, t in timings.items() if c not in losers}
    return min(eligible, key=eligible.get)
