"""Collection with Inductor's compile subprocess pool against compiling in the worker (gen_data_mm
--compile-pool), on the same inputs: throughput, time under the device lock, agreement of the timings.

Reads the two arms of ``gpu_jobs/compile_pool_ab.sh``; the figures are
``torchgen_ah.evaluation.studies.compile_pool_report`` (docs/datagen.md, "Compile pool"). This is its command line.

    python benchmarks/compile_pool_ab.py --inductor DIR_A --in-process DIR_B [--write]
"""

from __future__ import annotations

import argparse
import os

from torchgen_ah.evaluation.studies.compile_pool_report import report
from torchgen_ah.evaluation.results_section import publish

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inductor", required=True,
                   help="the pool arm's folder (step 'pool' of lane A of compile_pool_ab.sh)")
    p.add_argument("--in-process", dest="in_process", required=True,
                   help="the in-process arm's folder (step 'in_process' of lane B)")
    p.add_argument("--write", action="store_true", help="make it section compile_pool_ab of RESULTS.md")
    args = p.parse_args(argv)
    for folder in (args.inductor, args.in_process):
        if not os.path.isdir(folder):
            raise SystemExit(f"compile_pool_ab: {folder}: no such folder")
    command = "python benchmarks/compile_pool_ab.py --inductor A/pool --in-process B/in_process"
    body, _ = report({"inductor": args.inductor, "in-process": args.in_process}, command)
    return publish(RESULTS, "compile_pool_ab", body, args.write)


if __name__ == "__main__":
    raise SystemExit(main())
