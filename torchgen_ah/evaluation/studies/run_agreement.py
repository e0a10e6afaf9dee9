"""How far the timings of two collection runs agree, against each run's own repetition noise.

Why: a faster way of collecting (warm batched workers, two workers sharing a GPU, another compile pool) is
only worth having if it times the same kernels the same way. Comparing the per-(input, choice) medians of
two runs shows a difference; the rep 1 / rep 2 spread of one run says how large a difference noise alone
makes. Used by the collection benchmarks (``benchmarks/collect_throughput.py``, ``compile_pool_ab.py``,
``multigpu_collect.py``).
"""

from __future__ import annotations

import os

import numpy as np

from torchgen_ah.data.ah_log import input_keys, read_log


def per_choice_medians(log_path: str):
    """{input key: {choice: median ms}} and the set of inputs whose every choice got a finite time."""
    if not os.path.exists(log_path):
        return {}, set()
    log = read_log(log_path)
    frame = log.frame.assign(key=input_keys(log.frame, log.metadata))
    medians: dict = {}
    complete = set()
    for key, group in frame.groupby("key", sort=False):
        per_choice = group.groupby("choice")["feedback"].median()
        medians[key] = per_choice.to_dict()
        if len(per_choice) > 1 and np.isfinite(per_choice.to_numpy()).all():
            complete.add(key)
    return medians, complete


def _repetitions(log_path: str):
    """The log's rows with their input key and repetition number (0-based, per input and choice); None
    without a log."""
    if not os.path.exists(log_path):
        return None
    log = read_log(log_path)
    frame = log.frame.assign(key=input_keys(log.frame, log.metadata))
    return frame.assign(rep=frame.groupby(["key", "choice"]).cumcount())


def repetition_times(log_path: str, rep: int) -> dict:
    """{input key: {choice: time}} of one logged repetition (0-based), for comparing one way against
    another way's single repetition."""
    frame = _repetitions(log_path)
    if frame is None:
        return {}
    out: dict = {}
    chosen = frame[frame["rep"] == rep]
    for key, choice, value in zip(chosen["key"], chosen["choice"], chosen["feedback"]):
        out.setdefault(key, {})[choice] = value
    return out


def repetition_spread(log_path: str):
    """Noise floor of one way: first / second repetition of each (input, choice), median and 10th-90th
    percentile. Agreement between the ways is "within noise" when it sits inside these spreads."""
    frame = _repetitions(log_path)
    if frame is None:
        return None
    table = frame.pivot_table(index=["key", "choice"], columns="rep", values="feedback")
    if 1 not in table.columns:
        return None
    ratios = (table[0] / table[1]).replace([np.inf, -np.inf], np.nan).dropna().to_numpy()
    if not len(ratios):
        return None
    return {"pairs": len(ratios), "median": float(np.median(ratios)), "p10": float(np.percentile(ratios, 10)),
            "p90": float(np.percentile(ratios, 90))}


def compare(base: dict, warm: dict):
    """Ratio ``warm / base`` of every (input, choice) median both runs timed: median and percentiles, or
    None when they share no finite pair."""
    ratios = []
    for key, choices in warm.items():
        for choice, value in choices.items():
            other = base.get(key, {}).get(choice)
            if other is not None and np.isfinite(value) and np.isfinite(other) and other > 0:
                ratios.append(value / other)
    if not ratios:
        return None
    arr = np.array(ratios)
    return {"pairs": len(arr), "median": float(np.median(arr)), "p10": float(np.percentile(arr, 10)),
            "p90": float(np.percentile(arr, 90)), "p1": float(np.percentile(arr, 1)),
            "p99": float(np.percentile(arr, 99))}
