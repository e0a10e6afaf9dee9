"""Benchmark: wall time and peak RSS of ``read_log`` (and aggregate, merge) on the official files.

    python benchmarks/datalayer_read.py [--datasets datasets]

Needs the unpacked official data (``python -m torchgen_ah.get_mm_dataset --from DIR``). Each measurement
runs in a fresh subprocess so peak RSS is its own; the baseline row is the interpreter with numpy and
pandas imported and nothing read. Prints a markdown table and rewrites this benchmark's section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NAME = "datalayer_read"
RESULTS = os.path.join(HERE, "RESULTS.md")

CHILD = r"""
import json, os, resource, sys, tempfile, time
import numpy, pandas
from torchgen_ah.data.ah_log import input_keys, read_log
from torchgen_ah.data.aggregate import aggregate
from torchgen_ah.data.merge import merge_logs
task, paths = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
cpu0 = time.process_time()
rows = 0
if task == "read":
    logs = [read_log(p) for p in paths]
    rows = sum(len(l.frame) for l in logs)
elif task == "read+keys+aggregate":
    for p in paths:
        log = read_log(p)
        input_keys(log.frame, log.metadata)
        rows += len(aggregate(log.frame, log.metadata))
elif task == "merge":
    out = os.path.join(tempfile.mkdtemp(), "merged.txt")
    rows, _ = merge_logs(out, paths, log=lambda *_: None)
    os.remove(out)
elapsed = time.perf_counter() - start
cpu = time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "cpu": cpu, "peak_mib": peak, "rows": rows}))
"""


def measure(task: str, paths: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, task, *paths], capture_output=True, text=True,
                         check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=os.path.join(REPO, "datasets"))
    args = parser.parse_args()
    a100 = [os.path.join(args.datasets, "a100", f"a100_{n}.txt") for n in ("mm", "hf_train_mm", "timm_train_mm")]
    h100 = [os.path.join(args.datasets, "h100", f"h100_{n}.txt") for n in ("mm", "hf_train_mm", "timm_train_mm")]
    for path in a100 + h100:
        if not os.path.isfile(path):
            sys.exit(f"{path} missing: run python -m torchgen_ah.get_mm_dataset first")
    size = lambda paths: sum(os.path.getsize(p) for p in paths) / 2**20  # noqa: E731
    cases = [
        ("baseline (imports only)", "none", a100[:0], 0.0),
        ("read_log, 3 A100 files", "read", a100, size(a100)),
        ("read_log, 3 H100 files", "read", h100, size(h100)),
        ("read_log + input_keys + aggregate (rows out), 3 A100 files", "read+keys+aggregate", a100, size(a100)),
        ("merge_data (streaming, rows written), 3 A100 files", "merge", a100, size(a100)),
    ]
    lines = [
        f"Command: `python benchmarks/{NAME}.py` (official files unpacked in datasets/). "
        f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, "
        f"Python {platform.python_version()}; one fresh process per row (CPU s = its user+system time; "
        "wall s is inflated when other work shares the cores).",
        "",
        "| what | input MiB | rows | wall s | CPU s | peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, task, paths, mib in cases:
        r = measure(task, paths)
        lines.append(f"| {label} | {mib:.0f} | {r['rows']:,} | {r['seconds']:.2f} | {r['cpu']:.2f} | {r['peak_mib']:.0f} |")
    table = "\n".join(lines)
    print(table)
    update_results_section(RESULTS, NAME, "## Data layer: reading the official logs\n\n" + table, BENCHMARK_TITLE)


if __name__ == "__main__":
    main()
