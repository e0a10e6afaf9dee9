"""The held-out bar: MMRankingH200 vs torch's shipped and our regenerated MMRankingH100 on held-out H200 inputs.

The protocol, the rankers and the report are ``torchgen_ah.evaluation.studies.h200_quality`` (docs/trainer.md);
this is its command line. Run it from the repository: paths in the report are relative to the current folder.

    python benchmarks/h200_quality.py [--datasets datasets/h200] [--out-dir DIR] [--no-write] [--no-rotation]
"""

from __future__ import annotations

import argparse
import os
import sys

from torchgen_ah.evaluation.studies.h200_quality import run
from torchgen_ah.evaluation.results_section import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=os.path.join(ROOT, "datasets", "h200"),
                        help="folder holding the H200 logs (default datasets/h200)")
    parser.add_argument("--out-dir", default=None,
                        help="where MMRankingH200 is written (default: a temporary folder, removed)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument("--verbose", action="store_true", help="print the trainer's report")
    parser.add_argument("--no-rotation", action="store_true",
                        help="skip the five-rotation cross-check (four more trainings)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    body, _, _ = run(args.datasets, args.out_dir, args.verbose, argv, rotate=not args.no_rotation)
    return publish(RESULTS, "h200_quality", body, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
