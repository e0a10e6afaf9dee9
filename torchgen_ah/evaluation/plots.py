"""PNG plots of an evaluation (matplotlib, Agg backend: no display needed).

Left: per policy, geomean regret against default's pick versus autotune cost (measured autotune seconds
per mm when compile cost was run, else the mean number of choices benchmarked). Right: the distribution
of per-input regret of each policy (sorted regrets, one line per policy).
"""

from __future__ import annotations

import math

import numpy as np


def plot_evaluation(summary, per_input, path: str, autotune_seconds: dict | None = None, title: str = "") -> str:
    import matplotlib  # optional dependency (the "plot" extra): only plotting needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    use_seconds = bool(autotune_seconds) and all(p in autotune_seconds for p in summary["policy"]
                                                 if p not in ("space",))
    for record in summary.to_dict("records"):
        policy = record["policy"]
        if use_seconds:
            if policy not in autotune_seconds:
                continue
            x = autotune_seconds[policy]
        else:
            x = record["mean_benchmarked"]
        y = record["gmean_vs_default"]
        if not math.isfinite(y):
            continue
        left.scatter([x], [y], s=40)
        left.annotate(policy, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    left.axhline(1.0, color="grey", lw=0.8, ls="--")
    left.set_xlabel("autotune seconds per mm" if use_seconds else "choices benchmarked per input (mean)")
    left.set_ylabel("geomean regret vs default's pick (lower is better)")
    left.set_title(f"{title}: kernel quality vs autotune cost")

    for policy, group in per_input.groupby("policy", sort=False):
        regrets = np.sort(group["regret_vs_default"].to_numpy(dtype=float))
        regrets = np.where(np.isfinite(regrets), regrets, np.nan)
        right.plot(np.arange(1, len(regrets) + 1) / len(regrets), regrets, label=policy, lw=1.2)
    right.axhline(1.0, color="grey", lw=0.8, ls="--")
    right.set_xlabel("fraction of inputs")
    right.set_ylabel("regret vs default's pick")
    right.set_title("regret distribution (sorted)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
