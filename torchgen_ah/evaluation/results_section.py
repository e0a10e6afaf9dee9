"""One named section of a markdown results file (``benchmarks/RESULTS.md``), rewritten in place.

Each benchmark or evaluation owns the text between ``<!-- BEGIN name -->`` and ``<!-- END name -->``, so
several of them can update one file without touching each other's figures. Standard library only.
"""

from __future__ import annotations

import datetime
import json
import os

#: the first line of a benchmarks results file that a benchmark creates
BENCHMARK_TITLE = "# Benchmark results\n"


def update_results_section(path: str, section: str, body: str, title: str = "", day: str | None = None) -> None:
    """Replace (or append) the text between ``<!-- BEGIN section -->`` and ``<!-- END section -->``.

    ``title``: the first line of the file when it does not exist yet. The body's heading (its first line, when
    it is one) is followed by the day it was written (``day``, default today), so every figure carries its date.
    """
    begin, end = f"<!-- BEGIN {section} -->", f"<!-- END {section} -->"
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else title
    stamp = f"_Written {day or datetime.date.today().isoformat()}._"
    lines = body.strip().splitlines()
    if lines and lines[0].startswith("#"):
        body = "\n".join([lines[0], "", stamp, *lines[1:]])
    else:
        body = "\n".join([stamp, "", *lines])
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def publish(path: str, section: str, body: str, write: bool = True) -> int:
    """Print a benchmark's report and, when ``write``, make it section ``section`` of the results file at
    ``path``; returns the exit code 0."""
    print(body)
    if write:
        update_results_section(path, section, body, BENCHMARK_TITLE)
    return 0


def publish_report(text: str, figures: dict, section: str, json_path: str | None, results_md: str | None) -> int:
    """A report command's outputs: ``text`` printed, ``figures`` as JSON at ``json_path`` and ``text`` as
    section ``section`` of ``results_md`` (each when given); returns the exit code 0."""
    print(text)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1, allow_nan=False)
    if results_md:
        update_results_section(results_md, section, text, BENCHMARK_TITLE)
    return 0


def save_report(text: str, out_dir: str, filename: str, results_md: str | None, section: str, heading: str) -> None:
    """A run's report: printed, written as ``out_dir/filename`` and, when ``results_md`` is given, as section
    ``section`` of that file under ``heading``."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, filename), "w", encoding="utf-8") as f:
        f.write(text)
    if results_md:
        update_results_section(results_md, section, f"{heading}\n\n{text}", BENCHMARK_TITLE)
    print(text)
