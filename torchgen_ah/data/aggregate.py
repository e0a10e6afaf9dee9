"""Repeated measurements -> one row per (input, choice); ratios -> their geometric mean.

Timings of one kernel vary between runs (up to 1.5x for short kernels), so logs hold
repetitions. Training and evaluation want one number per (input, choice): the median, which one slow
outlier cannot move, together with how many measurements it summarises and how far they spread. Over
inputs, every stage reports ratios of such times (regrets, speed-ups) by their geometric mean, ``geomean``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ah_plugin.collect.log_format import CHOICE_COLUMN, FEEDBACK_COLUMN
from torchgen_ah.data.ah_log import FEATURE_TEXT_ATTR, feature_columns

COUNT_COLUMN = "count"
MIN_COLUMN = "feedback_min"
MAX_COLUMN = "feedback_max"
SPREAD_COLUMN = "spread"  # feedback_max / feedback_min (1.0 for a single measurement)


def geomean(values) -> float:
    """Geometric mean of ratios: nan for no values; inf when any value is not a finite positive number
    (a failed kernel's regret must not vanish into a finite mean)."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        return math.nan
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        return math.inf
    return float(np.exp(np.mean(np.log(arr))))


def relative_spread(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """max/min per group: 1.0 where they are equal (also 0/0 and inf/inf), inf where only min is 0."""
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = high / low
    return np.where(high == low, 1.0, spread)


def aggregate(frame: pd.DataFrame, metadata: dict) -> pd.DataFrame:
    """One row per distinct (features, choice), in order of first appearance.

    Columns: the frame's feature columns and ``choice`` (dtypes kept), ``feedback`` (median of the
    repetitions; ``inf`` counts as a measurement, so a choice that failed in most runs stays ``inf``),
    ``count``, ``feedback_min``, ``feedback_max`` and ``spread`` (max/min).
    """
    features = set(feature_columns(metadata))
    keys = [c for c in frame.columns if c in features] + [CHOICE_COLUMN]
    if not len(frame):
        out = frame[keys].copy()
        out[FEEDBACK_COLUMN] = np.empty(0)
        out[COUNT_COLUMN] = np.empty(0, dtype=np.int64)
        out[MIN_COLUMN] = np.empty(0)
        out[MAX_COLUMN] = np.empty(0)
        out[SPREAD_COLUMN] = np.empty(0)
        return out
    group = frame.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    _, first_row = np.unique(group, return_index=True)
    stats = (
        pd.Series(frame[FEEDBACK_COLUMN].to_numpy(dtype=np.float64))
        .groupby(group, sort=True)
        .agg(["median", "size", "min", "max"])
    )
    out = frame.iloc[first_row][keys].reset_index(drop=True)
    out[FEEDBACK_COLUMN] = stats["median"].to_numpy()
    out[COUNT_COLUMN] = stats["size"].to_numpy(dtype=np.int64)
    out[MIN_COLUMN] = stats["min"].to_numpy()
    out[MAX_COLUMN] = stats["max"].to_numpy()
    out[SPREAD_COLUMN] = relative_spread(out[MIN_COLUMN].to_numpy(), out[MAX_COLUMN].to_numpy())
    # carry the file's original numerical text (see ah_log.input_keys) to the surviving rows
    kept = frame.attrs.get(FEATURE_TEXT_ATTR)
    if kept:
        positions = frame.index[first_row]
        out.attrs[FEATURE_TEXT_ATTR] = {
            name: pd.Series(text.reindex(positions).to_numpy(dtype=object))
            for name, text in kept.items()
        }
    return out
