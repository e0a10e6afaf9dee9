"""Repetition consistency of a collected log: would the second repetition pick the same kernel as the first?

Why: the data teaches rankings, so what matters is whether an input's best choice is stable from one
logged repetition to the next, not only whether times agree on average. A collection setting that adds
noise (two workers sharing a GPU, a busy host) shows up here first, on the data itself, with no extra
GPU time. Rows of one (input, choice) are repetitions in file order: the first row is repetition 1.

Per input with two repetitions of at least two choices: the regret of repetition 1's pick under
repetition 2's times (1.0: same kernel, or one as fast), and the spread of the per-choice ratio
rep 1 / rep 2 (90th / 10th percentile), split by the input's best time (tiny kernels are noisier).

A part (``LABEL=START:END``) scores the rows START..END-1 of the log (0-based data rows, as read; it holds
the inputs whose first row is in it). ``benchmarks/rep_consistency.py`` is the command line.
"""

from __future__ import annotations

import math

import numpy as np

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.ah_log import input_keys, read_log

TINY_MS = 0.05  # inputs whose best kernel is faster than this are reported apart


def rep_pairs(frame, keys) -> dict[str, dict[str, tuple[float, float, int]]]:
    """{input key: {choice: (rep 1 time, rep 2 time, first row)}} for choices with two finite times."""
    out: dict[str, dict[str, tuple[float, float, int]]] = {}
    seen: dict[tuple[str, str], tuple[float, int]] = {}
    for row, key, choice, t in zip(frame.index.tolist(), keys.tolist(), frame["choice"].tolist(),
                                   frame["feedback"].tolist()):
        first = seen.get((key, choice))
        if first is None:
            seen[(key, choice)] = (t, row)
        elif choice not in out.get(key, {}) and all(math.isfinite(x) and x > 0 for x in (first[0], t)):
            out.setdefault(key, {})[choice] = (first[0], t, first[1])
    return out


def input_stats(pairs: dict[str, tuple[float, float, int]]) -> tuple[float, float, float, int] | None:
    """(regret of rep 1's pick under rep 2, p90/p10 of rep1/rep2, best rep-2 time, first row) or None."""
    if len(pairs) < 2:
        return None
    choices = list(pairs)
    r1 = np.array([pairs[c][0] for c in choices])
    r2 = np.array([pairs[c][1] for c in choices])
    regret = float(r2[int(np.argmin(r1))] / r2.min())
    p10, p90 = np.quantile(r1 / r2, [0.1, 0.9])
    return regret, float(p90 / p10), float(r2.min()), min(p[2] for p in pairs.values())


def summarize(stats: list[tuple[float, float, float, int]]) -> dict:
    if not stats:
        return {"inputs": 0}
    regrets = np.array([s[0] for s in stats])
    return {"inputs": len(stats), "same_pick": int((regrets <= 1.0).sum()),
            "regret_gmean": geomean(regrets), "regret_max": float(regrets.max()),
            "spread_median": float(np.median([s[1] for s in stats]))}


def parse_part(text: str) -> tuple[str, int, int | None]:
    label, sep, span = text.rpartition("=")
    start, colon, end = span.partition(":")
    if not sep or not colon or not label:
        raise ValueError(f"--part {text!r}: expected LABEL=START:END (END may be empty)")
    try:
        return label, int(start or 0), (int(end) if end else None)
    except ValueError:
        raise ValueError(f"--part {text!r}: START and END must be integers") from None


def report(path: str, parts: list[tuple[str, int, int | None]]) -> tuple[list[str], dict]:
    log = read_log(path)
    keys = input_keys(log.frame, log.metadata)
    stats = [s for s in (input_stats(p) for p in rep_pairs(log.frame, keys).values()) if s is not None]
    parts = parts or [("all rows", 0, None)]
    lines = ["| part | kernels | inputs with 2 reps | same pick in both reps | regret of rep 1's pick under rep 2: "
             "gmean | max | per-choice rep1/rep2 spread (p90/p10), median over inputs |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    table = {}
    for label, start, end in parts:
        for bucket, keep in ((f"best < {TINY_MS * 1000:g} us", lambda s: s[2] < TINY_MS),
                             (f"best >= {TINY_MS * 1000:g} us", lambda s: s[2] >= TINY_MS)):
            chosen = [s for s in stats if keep(s) and start <= s[3] and (end is None or s[3] < end)]
            row = summarize(chosen)
            table[(label, bucket)] = row
            if row["inputs"] == 0:
                lines.append(f"| {label} | {bucket} | 0 | - | - | - | - |")
                continue
            lines.append(f"| {label} | {bucket} | {row['inputs']} | {row['same_pick']} | {row['regret_gmean']:.4f} | "
                         f"{row['regret_max']:.3f} | {row['spread_median']:.3f} |")
    return lines, table

