"""Autotuning policies replayed on one timing table, and their scores.

A policy answers, for one input, "which choices would you benchmark?" (or "which one do you take
without benchmarking?"). Replaying that answer on the timing table gives the kernel it ends up with:
the fastest (by median) of the choices it benchmarks. Regret is that kernel's time over a reference:
default max-autotune's pick (the fastest of default's set) or the best of the whole searched space.

Policies:
- ``default``: default max-autotune's own choice set.
- ``space``: every choice of the searched space (the best there is; a reference, not a mode).
- ``builtin_ah``: torch's shipped ``MMRankingH100`` ranked through upstream's own
  ``get_decisions_ranked`` on an ``AHContext`` built as ``mm_autoheuristic`` builds it, top 10 of the
  candidates it knows plus ``extern_mm``; no decision (precondition fails, nothing known) falls back to
  default's set, as upstream does.
- ``plugin_k10`` / ``plugin_adaptive`` / ``plugin_k1``: the plugin's artifact through ``ah_plugin.use.ranking``.
- ``cache``: a results cache: a hit takes the recorded winner with no benchmarking; a miss autotunes
  default's set.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.timing_table import EvaluationTimingTable

EXTERN = "extern_mm"
BUILTIN_TOP_K = 10
H100_SHARED_MEMORY = 232448
H100_CAPA = (9, 0)


@dataclass
class Selection:
    """What a policy does on one input: the choices it would hand to autotuning.

    A single choice is taken without benchmarking (Inductor skips autotuning for one choice).
    ``note`` says why a fallback happened (e.g. "no decision: default set").
    """

    choices: list[str]
    note: str = ""

    @property
    def benchmarked(self) -> int:
        return 0 if len(self.choices) <= 1 else len(self.choices)


@dataclass
class Policy:
    """A named rule: ``select(key, features, candidates, default_set) -> Selection``."""

    name: str
    select: Callable[[str, dict, list, list], Selection]
    description: str = ""


# -- simple policies ----------------------------------------------------------------------------------


#: the plugin's top-k modes and policies by their names in older runs' files and commands: read as today's
OLD_MODE_NAMES = {"ours_adaptive": "plugin_adaptive", "ours_k10": "plugin_k10", "ours_k1": "plugin_k1",
                  "ours_top1": "plugin_top1"}


def mode_name(name: str) -> str:
    """A mode's or policy's name as it is today (``ours_k10``, an older name, is ``plugin_k10``)."""
    return OLD_MODE_NAMES.get(name, name)


def default_policy() -> Policy:
    return Policy(
        "default",
        lambda key, features, candidates, default_set: Selection(list(default_set)),
        "default max-autotune's choice set",
    )


def space_policy() -> Policy:
    return Policy(
        "space",
        lambda key, features, candidates, default_set: Selection(list(candidates)),
        "every choice of the searched space (reference)",
    )


def fixed_policy(name: str, choose: Callable[[str, list], list], description: str = "") -> Policy:
    """A policy from a function of (input key, candidates) -> choices (tests, ad-hoc rules)."""
    return Policy(
        name,
        lambda key, features, candidates, default_set: Selection(list(choose(key, candidates))),
        description,
    )


def cache_policy(solutions: dict[str, str], name: str = "cache") -> Policy:
    """Results cache: ``solutions`` maps input key -> recorded winner. A hit benchmarks nothing."""

    def select(key, features, candidates, default_set):
        picked = solutions.get(key)
        if picked is not None and picked in candidates:
            return Selection([picked])
        return Selection(list(default_set), note="cache miss: default set")

    return Policy(name, select, "results cache (hit: recorded winner, no benchmarking)")


# -- torch's built-in AutoHeuristic ---------------------------------------------------------------------


def _upstream_id(choice: str) -> str:
    """The id upstream's artifact knows a choice by (ours may carry a disambiguating suffix)."""
    from ah_plugin.use.choice_ids import base_id

    return base_id(choice)


def builtin_ah_ranked(features: dict, metadata: dict, upstream_candidates: list[str]) -> list[str] | None:
    """Upstream ids the shipped H100 artifact would keep (top 10 of those it knows, best first), or
    None when it makes no decision (precondition fails, features missing)."""
    # torch's own AutoHeuristic only when its policy is scored: scoring needs no torch otherwise
    from ah_plugin.inductor import compile_tools

    ranked = compile_tools.builtin_mm_ranking(features, metadata, upstream_candidates,
                                              compile_tools.shipped_heuristic("MMRankingH100"))
    return None if ranked is None else ranked[:BUILTIN_TOP_K]


def builtin_ah_policy(metadata: dict) -> Policy:
    """torch's built-in AutoHeuristic (``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm``) on the searched space."""

    def select(key, features, candidates, default_set):
        by_upstream: dict[str, str] = {}
        for choice in candidates:  # upstream maps an id to the last choice registered under it
            by_upstream[_upstream_id(choice)] = choice
        kept = builtin_ah_ranked(features, metadata, list(by_upstream))
        if kept is None:
            return Selection(list(default_set), note="no decision: default set")
        chosen = [by_upstream[c] for c in kept]
        if EXTERN in candidates and EXTERN not in chosen:
            chosen.append(EXTERN)
        if not chosen:
            return Selection(list(default_set), note="no known choice: default set")
        order = {c: i for i, c in enumerate(candidates)}
        return Selection(sorted(chosen, key=order.__getitem__))

    return Policy("builtin_ah", select, "torch's shipped MMRankingH100, top 10 + extern_mm")


# -- our heuristic ------------------------------------------------------------------------------------


def ours_policy(k, metadata: dict, artifact_dir: str | None = None, name: str | None = None,
                alone: bool = False, package: bool = True) -> Policy:
    """Our heuristic exactly as the plugin's USE policy runs it: ``ah_plugin.use.ranking.RankingPolicy``
    (artifact chosen by ``artifact_loader`` for the table's device metadata, top-k or adaptive k,
    aten kept, at least 2 choices) on an ``AutotuneRequest`` built from the table. When it has no
    opinion (no artifact fits, it ranks none of the candidates) Inductor's default set is used.

    k: an int, or "adaptive". ``alone``: the top k without aten and with no minimum (``plugin_top1`` with
    k=1: one choice, nothing benchmarked). ``package``: also the installed package's artifacts (False:
    ``artifact_dir`` alone, to compare artifact sets).
    """
    from ah_plugin.policy import AutotuneRequest
    from ah_plugin.use.ranking import ADAPTIVE, RankingPolicy, UseOptions

    extra = {"keep_aten": False, "min_choices": 1} if alone else {}
    if k == ADAPTIVE:
        options = UseOptions(adaptive=True, **extra)
    else:
        options = UseOptions(top_k=int(k), **extra)
    use = RankingPolicy(options=options, artifact_dir=artifact_dir, package=package)
    label = name or ("plugin_adaptive" if k == ADAPTIVE else f"plugin_top{k}" if alone else f"plugin_k{k}")
    op_name = metadata.get("name", "mm")

    def select(key, features, candidates, default_set):
        request = AutotuneRequest(
            op_name=op_name, features=dict(features), metadata=dict(metadata), candidates=list(candidates)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # fallbacks are reported per input instead
            kept = use.select(request)
        if not kept:
            return Selection(list(default_set), note="no decision: default set")
        return Selection(list(kept))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        artifact = use.artifact_for(op_name, dict(metadata)) if metadata else None
    description = f"our artifact {artifact.describe() if artifact else '(none fits)'}, k={k}"
    policy = Policy(label, select, description)
    policy.artifact = artifact  # type: ignore[attr-defined]
    return policy


# -- scoring ------------------------------------------------------------------------------------------


def _best(times: dict[str, float], choices) -> float:
    values = [times[c] for c in choices if c in times]
    return min(values) if values else math.inf


def score_policies(table: EvaluationTimingTable, policies: list[Policy]) -> pd.DataFrame:
    """One row per (input, policy): the kernel's time, regret vs default's pick and vs the space's best,
    and the number of choices benchmarked. ``regret_vs_default`` is ``policy time / default pick time``
    (> 1 is worse than default)."""
    rows = []
    for key in table.inputs():
        times = table.times(key)
        candidates = table.candidates(key)
        default_set = table.default_set(key)
        default_time = _best(times, default_set)
        best_time = _best(times, candidates)
        features = table.features.get(key, {})
        for policy in policies:
            selection = policy.select(key, features, candidates, default_set)
            unknown = [c for c in selection.choices if c not in times]
            if unknown:
                raise ValueError(
                    f"policy {policy.name} chose {unknown} for input {key!r}, not in the timing table"
                )
            time = _best(times, selection.choices)
            picked = min(selection.choices, key=lambda c: times[c]) if selection.choices else ""
            rows.append(
                {
                    "input": key,
                    "label": table.label(key),
                    "policy": policy.name,
                    "picked": picked,
                    "time_ms": time,
                    "default_ms": default_time,
                    "best_ms": best_time,
                    "regret_vs_default": time / default_time if default_time > 0 else math.nan,
                    "regret_vs_best": time / best_time if best_time > 0 else math.nan,
                    "benchmarked": selection.benchmarked,
                    "default_benchmarked": len(default_set) if len(default_set) > 1 else 0,
                    "note": selection.note,
                }
            )
    return pd.DataFrame(rows)


def summarize(per_input: pd.DataFrame) -> pd.DataFrame:
    """Per policy: geomean and max regret (vs default's pick and vs the space's best), inputs worse than
    default by > 2% and > 10%, and choices benchmarked (mean, and total as a share of default's)."""
    out = []
    for name, group in per_input.groupby("policy", sort=False):
        default_total = group["default_benchmarked"].sum()
        out.append(
            {
                "policy": name,
                "inputs": len(group),
                "gmean_vs_default": geomean(group["regret_vs_default"]),
                "max_vs_default": float(group["regret_vs_default"].max()),
                "gmean_vs_best": geomean(group["regret_vs_best"]),
                "max_vs_best": float(group["regret_vs_best"].max()),
                "worse_2pct": int((group["regret_vs_default"] > 1.02).sum()),
                "worse_10pct": int((group["regret_vs_default"] > 1.10).sum()),
                "mean_benchmarked": float(group["benchmarked"].mean()),
                "benchmarked_share": (
                    float(group["benchmarked"].sum() / default_total) if default_total else math.nan
                ),
                "fallbacks": int((group["note"] != "").sum()),
            }
        )
    return pd.DataFrame(out)


# -- the bars (docs/evaluate.md) ----------------------------------------------------------------------


@dataclass
class Bar:
    """One pass/fail line. ``passed`` is None when a needed measurement is missing."""

    name: str
    passed: bool | None
    detail: str


def _time_share(summary_row, policy: str, autotune_seconds: dict | None) -> tuple[float, str]:
    """Autotune time of ``policy`` over default's: measured seconds when given, else the share of
    choices benchmarked (a proxy: benchmarking dominates autotune time once kernels are compiled)."""
    if autotune_seconds and policy in autotune_seconds and autotune_seconds.get("default"):
        share = autotune_seconds[policy] / autotune_seconds["default"]
        return share, f"autotune {autotune_seconds[policy]:.2f} s vs default {autotune_seconds['default']:.2f} s"
    share = float(summary_row["benchmarked_share"])
    return share, f"{share:.0%} of default's choices benchmarked (proxy; no compile-cost seconds)"


def check_bars(
    summary: pd.DataFrame,
    fast_policy: str = "plugin_adaptive",
    quality_policy: str = "plugin_k10",
    autotune_seconds: dict | None = None,
    compile_seconds: dict | None = None,
) -> list[Bar]:
    """The three operating points (Fast, Quality, Cache) against default max-autotune's pick.

    autotune_seconds: policy -> autotune seconds per mm (compile cost, same policy names).
    compile_seconds: policy -> compile seconds per mm; needs "cache" and "off" for the cache bar.
    """
    rows = {r["policy"]: r for r in summary.to_dict("records")}
    bars = []

    def scored(label: str, policy: str, verdict) -> Bar:
        """The bar of a policy that was scored: ``verdict(row, time share, how) -> (ok, detail)``."""
        if policy not in rows:
            return Bar(f"{label} ({policy})", None, "policy not scored")
        r = rows[policy]
        ok, detail = verdict(r, *_time_share(r, policy, autotune_seconds))
        return Bar(f"{label} ({policy})", bool(ok),
                   f"{detail}; {r['fallbacks']} of {r['inputs']} inputs fell back to default's set")

    def fast(r, share, how):
        return (r["gmean_vs_default"] <= 1.01 and r["max_vs_default"] <= 1.10 and share <= 0.25,
                f"geomean {r['gmean_vs_default']:.4f}x of default's pick (bar <= 1.01), "
                f"worst {r['max_vs_default']:.3f}x (bar <= 1.10), {how} (bar <= 25%)")

    def quality(r, share, how):
        speedup = 1.0 / r["gmean_vs_default"] if r["gmean_vs_default"] > 0 else math.nan
        return (speedup >= 1.03 and r["max_vs_default"] <= 1.02 and share <= 1.0,
                f"geomean speedup {speedup:.4f}x over default's pick (bar >= 1.03, aim 1.05), "
                f"worst {r['max_vs_default']:.3f}x slower (bar <= 1.02), {how} (bar <= 100%)")

    bars.append(scored("Fast", fast_policy, fast))
    bars.append(scored("Quality", quality_policy, quality))

    if "cache" in rows:
        r = rows["cache"]
        none_benchmarked = r["mean_benchmarked"] == 0
        detail = f"mean choices benchmarked {r['mean_benchmarked']:.2f} (bar 0)"
        if compile_seconds and compile_seconds.get("cache") and compile_seconds.get("off"):
            ratio = compile_seconds["cache"] / compile_seconds["off"]
            ok = none_benchmarked and ratio <= 1.10
            detail += (
                f", compile {compile_seconds['cache']:.2f} s vs max-autotune off "
                f"{compile_seconds['off']:.2f} s = {ratio:.3f}x (bar <= 1.10)"
            )
            bars.append(Bar("Cache hits", bool(ok), detail))
        else:
            bars.append(Bar("Cache hits", None if none_benchmarked else False,
                            detail + ", compile time not measured (run compile cost)"))
    else:
        bars.append(Bar("Cache hits", None, "policy not scored"))
    return bars
