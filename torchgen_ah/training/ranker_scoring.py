"""Score several mm rankers on one timing table, with one rule for choices a ranker does not know.

Why: a heuristic trained on one device or search space (torch's MMRankingH100, 2024) is judged on
measurements from another (our H200 data, with configs it never saw). Every ranker must see the same
inputs, the same median times and the same rules, or the comparison flatters one of them.

The rules, identical for every ranker:

- the ranker's list for an input is the first ``k`` choices of its ranking that have a finite median
  time for the input, plus ``extern_mm`` (the definition of ``train_decision.evaluate_orders``, used by
  ``benchmarks/train_quality.py``);
- a measured choice the ranker does not rank for the input ("unknown": absent from its ranking) is
  never in its list: a ranker can only propose what it knows, as the plugin's USE policy and torch's
  built-in AutoHeuristic do. When it knows fewer than ``k`` measured choices, its list is shorter;
- coverage: measured choices it ranks / measured choices, and the inputs whose fastest measured choice
  it ranks (or is ``extern_mm``, always listed): without that, a hit is impossible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.training.train_decision import Metrics, evaluate_orders

ALWAYS_LISTED = "extern_mm"
#: torch's shipped mm rankings, by device
SHIPPED = {"a100": "MMRankingA100", "h100": "MMRankingH100"}


def orders_from_rankings(rankings: list[list[str]], choices: list[str]) -> np.ndarray:
    """(n, len(choices)) indices into `choices`, best first; unranked slots hold ``len(choices)``.

    Choices a ranking names that are not in `choices` (never measured here) are dropped; repeats keep
    their first place.
    """
    pad = len(choices)
    pos = {c: i for i, c in enumerate(choices)}
    orders = np.full((len(rankings), len(choices)), pad, dtype=np.int64)
    for i, ranking in enumerate(rankings):
        idx = list(dict.fromkeys(pos[c] for c in ranking if c in pos))
        orders[i, : len(idx)] = idx
    return orders


def with_unranked_column(times: np.ndarray) -> np.ndarray:
    """`times` plus one all-nan column: the slot that padded orders point to ("not ranked")."""
    return np.concatenate([times, np.full((len(times), 1), np.nan)], axis=1)


def listed_best(orders: np.ndarray, times: np.ndarray, k: int, always_idx: int | None) -> np.ndarray:
    """Per input: the best median time in the ranker's list (inf when the list has no finite time).

    `times` has the unranked column (``with_unranked_column``); the list is built as in
    ``evaluate_orders``.
    """
    ranked = np.take_along_axis(times, orders, axis=1)
    fin = np.isfinite(ranked)
    in_top = fin & (np.cumsum(fin, axis=1) <= k)
    best = np.where(in_top, ranked, np.inf).min(axis=1)
    if always_idx is not None:
        always = times[:, always_idx]
        best = np.minimum(best, np.where(np.isfinite(always), always, np.inf))
    return best


@dataclass
class RankerScore:
    """One ranker on one set of inputs (regrets: time / best measured time of the input)."""

    name: str
    metrics: Metrics  # hit rate, regret gmean/max, top-1 (evaluate_orders)
    measured: int  # (input, choice) pairs with a finite time
    known: int  # ... of which the ranker ranks
    min_known_share: float  # lowest per-input share of measured choices it ranks
    best_known: int  # inputs whose fastest measured choice it ranks or always lists
    vs_default_inputs: int  # inputs whose default max-autotune set is known
    vs_default_gmean: float  # best of its list / best of default's set (<1: better than default)
    vs_default_max: float
    regrets: np.ndarray | None = None  # per scored input: best time in the list / best measured time
    best_times: np.ndarray | None = None  # per scored input: its best measured time (the log's unit, ms)

    @property
    def inputs(self) -> int:
        return self.metrics.inputs


def score_ranker(name: str, orders: np.ndarray, times: np.ndarray, choices: list[str], k: int = 10,
                 default_mask: np.ndarray | None = None) -> RankerScore:
    """Score padded `orders` (``orders_from_rankings``) against `times` (n, len(choices)) medians.

    default_mask: (n, len(choices)) bool, default max-autotune's choice set per input; a row with no
    True (or None for all) means "unknown" and is left out of the vs-default figures.
    """
    times = np.asarray(times, dtype=np.float64)
    scored = np.isfinite(times).any(axis=1)  # evaluate_orders scores only these inputs
    padded = with_unranked_column(times)
    always_idx = choices.index(ALWAYS_LISTED) if ALWAYS_LISTED in choices else None
    metrics = evaluate_orders(name, orders, padded, k, always_idx)

    fin = np.isfinite(times) & scored[:, None]
    ranked = np.zeros_like(fin)
    rows = np.repeat(np.arange(len(orders)), orders.shape[1])
    cols = orders.ravel()
    keep = cols < len(choices)
    ranked[rows[keep], cols[keep]] = True
    known_pairs = fin & ranked
    per_input = known_pairs.sum(axis=1)[scored] / np.maximum(fin.sum(axis=1)[scored], 1)
    masked = np.where(fin, times, np.inf)
    best_time = masked.min(axis=1)
    # ties: any fastest choice the ranker knows counts
    fastest = fin & (masked <= best_time[:, None])
    reachable = (fastest & ranked).any(axis=1)
    if always_idx is not None:
        reachable |= fastest[:, always_idx]

    listed = listed_best(orders, padded, k, always_idx)
    n_def, def_g, def_m = 0, float("nan"), float("nan")
    if default_mask is not None:
        dm = np.asarray(default_mask, dtype=bool) & fin
        has = dm.any(axis=1) & scored
        if has.any():
            default_best = np.where(dm, times, np.inf).min(axis=1)[has]
            ours = listed[has]
            ratio = ours / default_best
            n_def, def_g, def_m = int(has.sum()), geomean(ratio), float(ratio.max())
    regrets = listed[scored] / best_time[scored]
    return RankerScore(name, metrics, int(fin.sum()), int(known_pairs.sum()),
                       float(per_input.min()) if len(per_input) else float("nan"),
                       int(reachable[scored].sum()), n_def, def_g, def_m, regrets, best_time[scored])


def paired_ratio_interval(a: np.ndarray, b: np.ndarray, resamples: int = 2000, level: float = 0.95,
                          seed: int = 0) -> tuple[float, float, float]:
    """gmean(a / b) over paired per-input regrets, and its percentile bootstrap interval (inputs
    resampled with replacement, fixed seed). Why: a few dozen held-out inputs whose regrets sit within
    0.5% of 1 cannot separate two rankers whose gmeans differ in the fourth decimal; the interval says so.
    """
    d = np.log(np.asarray(a, dtype=np.float64)) - np.log(np.asarray(b, dtype=np.float64))
    if len(d) == 0:
        nan = float("nan")
        return nan, nan, nan
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(d.mean())), float(np.exp(lo)), float(np.exp(hi))


def artifact_rankings(heuristic, feature_rows: list[dict]) -> list[list[str]]:
    """Choice ids in the order a Contract-2 artifact ranks them, for every input."""
    return [[choice for choice, _ in heuristic.rank(row)] for row in feature_rows]


def shipped_orders(device: str, table, choices: list[str]):
    """Padded orders (``orders_from_rankings``) of torch's shipped artifact for every input of `table`,
    ranked through its own ``get_decisions_ranked``; None if this torch lacks it."""
    try:
        # torch only here: scoring our own rankers needs neither torch nor Inductor
        from ah_plugin.inductor import compile_tools

        heuristic = compile_tools.shipped_heuristic(SHIPPED[device])
    except Exception as exc:  # noqa: BLE001 - a benchmark row, not a failure
        print(f"shipped {SHIPPED[device]} unavailable: {exc}")
        return None
    metadata = {"name": "mm"}
    rankings = [compile_tools.builtin_mm_ranking(row, metadata, None, heuristic, check_precondition=False) or []
                for row in table.features.to_dict("records")]
    return orders_from_rankings(rankings, choices)


def fmt_ratio(value: float, digits: int = 4) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"
