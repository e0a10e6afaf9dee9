"""Per-lowering cost of use mode: feature extraction plus the USE policy's select (artifact ranking).

    python benchmarks/use_overhead.py

Times, per mm lowering, what the hook adds on top of Inductor: ``features.op_features`` (plain tensor
descriptions -> the log's columns) and ``RankingPolicy.select`` (artifact rank + top-k filtering) on
41 candidates. The artifact is the packaged ``MMRankingH100`` when present, else one trained here by
``torchgen_ah.train_generic`` on a synthetic log (random shapes, 40 Triton configs + extern_mm, tree
depth up to 9). Goal: under 1 ms per lowering. Writes its section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import tempfile
import time

from ah_plugin.use import artifact_loader
from ah_plugin.collect import features, log_format
from ah_plugin.policy import AutotuneRequest
from ah_plugin.use.ranking import RankingPolicy, UseOptions
from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section
from torchgen_ah.training.train_generic import train_from_log

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")

H100 = {"device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H100 80GB HBM3"}
CONFIGS = [f"type=triton_BLOCK-M={m}_BLOCK-K={k}_BLOCK-N={n}_numstages={s}_numwarps=4"
           for m in (32, 64, 128) for k in (32, 64) for n in (64, 128) for s in (2, 3, 4)][:40]
CHOICES = ["extern_mm"] + CONFIGS


def tensors(m, k, n):
    return [{"size": [m, k], "stride": [k, 1], "dtype": "torch.bfloat16"},
            {"size": [k, n], "stride": [n, 1], "dtype": "torch.bfloat16"}]


def synthetic_artifact(directory: str) -> str:
    """A log of 400 random inputs x 41 choices with shape-dependent winners, trained into an artifact."""
    rng = random.Random(0)
    rows, meta = [], None
    for _ in range(400):
        m, k, n = (rng.choice([64, 128, 256, 1024, 4096, 8192]) for _ in range(3))
        feats, num, cat = features.op_features("mm", tensors(m, k, n), False)
        meta = meta or {k2: v for k2, v in features.metadata("mm", num, cat, **H100).items() if k2 != "device_name"}
        for i, choice in enumerate(CHOICES):
            t = (1 + ((m * 7 + k * 3 + n + i * 131) % 97) / 50) * m * k * n / 1e9
            rows.append(log_format.format_row(meta, features.ordered_features(feats, num, cat), choice, t))
    path = os.path.join(directory, "synthetic_mm.txt")
    log_format.append_rows(path, meta, rows)
    return train_from_log(path, heuristic_name="MMRankingSynthetic", out_dir=os.path.join(directory, "art"),
                          grid={"max_depth": [9], "min_samples_leaf": [1], "criterion": ["entropy"]})


def median_us(fn, n=3000) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(samples)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help without a run
    packaged = artifact_loader.select("mm", dict(H100, name="mm"),
                                      (("package", artifact_loader.package_artifact_dir() or ""),))
    tmp = tempfile.mkdtemp(prefix="use_overhead_")
    if packaged is not None:
        art_dir, label = None, f"packaged {packaged.name}"
    else:
        path = synthetic_artifact(tmp)
        art_dir, label = os.path.dirname(path), "synthetic (train_generic, depth <= 9)"
    artifact_loader.clear_cache()
    rng = random.Random(1)
    shapes = [tuple(rng.choice([64, 96, 512, 1000, 3072, 8192]) for _ in range(3)) for _ in range(64)]
    descs = [tensors(*s) for s in shapes]
    rows = []
    for top_k in ("10", "adaptive"):
        options = UseOptions.from_environment({}, top_k=int(top_k) if top_k.isdigit() else top_k)
        policy = RankingPolicy(["mm"], artifact_dir=art_dir, options=options)
        state = {"i": 0}

        def extract():
            state["i"] = (state["i"] + 1) % len(descs)
            return features.op_features("mm", descs[state["i"]], False)

        requests = []
        for d in descs:
            feats, num, cat = features.op_features("mm", d, False)
            meta = features.metadata("mm", num, cat, **H100)
            requests.append(AutotuneRequest("mm", features.ordered_features(feats, num, cat), meta, list(CHOICES)))
        kept = [len(policy.select(r) or CHOICES) for r in requests]  # loads the artifact once

        def select():
            state["i"] = (state["i"] + 1) % len(requests)
            return policy.select(requests[state["i"]])

        f_us, s_us = median_us(extract), median_us(select)
        rows.append((top_k, f_us, s_us, statistics.mean(kept)))
    table = ["| k | features us | select us | total us | mean choices kept (of 41) |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for top_k, f_us, s_us, kept in rows:
        table.append(f"| {top_k} | {f_us:.1f} | {s_us:.1f} | {f_us + s_us:.1f} | {kept:.1f} |")
    text = "\n".join(table)
    print(f"artifact: {label}\n{text}")
    section = (
        "## Use mode: per-lowering overhead (features + ranking)\n\n"
        f"Command: `python benchmarks/use_overhead.py`. Artifact: {label}. 64 mm inputs, 41 candidates; "
        f"median of 5 runs of 3000 calls. Machine: {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, Python {platform.python_version()}. Goal: under 1000 us per lowering.\n\n"
        f"{text}\n"
    )
    update_results_section(RESULTS, "use_overhead", section, BENCHMARK_TITLE)


if __name__ == "__main__":
    main()
