"""Ship check for MMRankingH200: re-score a committed H200 evaluation run with it, beside the packaged ranking.

The training, the two artifact folders, the scores and the verdict are
``torchgen_ah.evaluation.studies.h200_eval_rescore`` (docs/trainer.md, "Ship check"); this is its command line. No
GPU: the run's logs hold every timing.

    python benchmarks/h200_eval_rescore.py [--run benchmarks/runs/evaluate_h200] [--datasets datasets/h200]
        [--no-write]
"""

from __future__ import annotations

import argparse
import os
import sys

from torchgen_ah.evaluation.evaluate import DEFAULT_SHAPES
from torchgen_ah.evaluation.studies.h200_eval_rescore import run
from torchgen_ah.evaluation.results_section import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")
RUN = os.path.join(ROOT, "benchmarks", "runs", "evaluate_h200")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=RUN, help="a finished torchgen_ah.evaluate run (default: the committed one)")
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="the run's shapes file")
    parser.add_argument("--datasets", default=os.path.join(ROOT, "datasets", "h200"),
                        help="folder of the H200 logs to train on (default datasets/h200)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    body, _, _ = run(args.run, args.datasets, args.shapes, argv)
    return publish(RESULTS, "h200_eval_rescore", body, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
