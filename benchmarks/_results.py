"""Rewrite one benchmark's section of benchmarks/RESULTS.md (between its BEGIN/END markers)."""

from __future__ import annotations

import os

from torchgen_ah.evaluation.results_section import update_results_section

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def update_section(name: str, body: str) -> None:
    update_results_section(RESULTS, name, body, title="# Benchmark results\n")


def publish(name: str, body: str, write: bool) -> int:
    """Print a benchmark's report and, when `write`, make it section `name` of RESULTS.md; exit code 0."""
    print(body)
    if write:
        update_section(name, body)
    return 0
