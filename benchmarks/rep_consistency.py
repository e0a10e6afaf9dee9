"""Repetition consistency of a collected log: would the second repetition pick the same kernel as the first?

The figures are ``torchgen_ah.evaluation.studies.rep_consistency``; this is its command line.

    python benchmarks/rep_consistency.py datasets/h200/h200_mm.txt.gz --part "one worker per GPU=0:5802" \\
        --part "two workers per GPU=5802:" --write

``--part LABEL=START:END`` scores the rows START..END-1 of the log (0-based data rows, as read; a part
holds the inputs whose first row is in it). Writes its section of ``benchmarks/RESULTS.md`` with --write.
"""

from __future__ import annotations

import argparse
import os
import sys

from ah_plugin.collect.log_format import AHLogError
from torchgen_ah.evaluation.studies.rep_consistency import parse_part, report
from torchgen_ah.evaluation.results_section import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", help="an AutoHeuristic log with repetitions (gen_data_mm --num-reps >= 2)")
    p.add_argument("--part", action="append", default=[], help="LABEL=START:END (repeatable)")
    p.add_argument("--write", action="store_true", help="update the rep_consistency section of RESULTS.md")
    args = p.parse_args(argv)
    try:
        parts = [parse_part(t) for t in args.part]
        lines, _ = report(args.log, parts)
    except (OSError, ValueError, AHLogError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    command = "python benchmarks/rep_consistency.py " + " ".join(
        [os.path.relpath(args.log, ROOT) if os.path.isabs(args.log) else args.log]
        + [f'--part "{t}"' for t in args.part])
    body = "\n".join(["## Repetition consistency of collected data", "", f"Command: `{command}`", "", *lines])
    return publish(RESULTS, "rep_consistency", body, write=args.write)


if __name__ == "__main__":
    sys.exit(main())
