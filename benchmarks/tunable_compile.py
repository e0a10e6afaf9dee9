"""Compile time of a small real model with a warm results file vs max-autotune off vs default max-autotune.

The runs, their order under a budget, the bar and the table are ``torchgen_ah.evaluation.tunable_compile``
(docs/tunable.md); this is its command line.

    python benchmarks/tunable_compile.py --out-dir /tmp/tc --device cuda --max-minutes 4

`--max-minutes` skips each run the remaining budget cannot hold. `--variants gemm` runs the GEMM-only
variant alone (the bar's like-for-like comparison, see RESULTS.md); `--variants gemm,mode` runs it first.
Writes its section of benchmarks/RESULTS.md (between `<!-- BEGIN tunable_compile -->` markers) unless
`--no-write`.
"""

from __future__ import annotations

import argparse
import json
import os

from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section
from torchgen_ah.evaluation.tunable_compile import SECTION, VARIANTS, render, run_all

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True, help="work folder: caches, results files, verbose logs")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="auto", choices=["auto", "bert", "mlp", "tiny"],
                        help="auto: BERT when transformers is installed, else the 768-3072 MLP")
    parser.add_argument("--max-minutes", type=float, default=0, help="skip low-priority runs beyond this budget")
    parser.add_argument("--variants", default="mode,gemm",
                        help="comma-separated variants to run, most important first (mode, gemm)")
    parser.add_argument("--warm-repeats", type=int, default=1,
                        help="run the warm off and hit runs this many times each (the extra runs right after "
                             "the bar's runs, budget permitting) and report the median")
    parser.add_argument("--profile", nargs="?", const="all", default=None,
                        help="after the repeats, run the warm off and hit runs (or the comma-separated runs named, "
                             "e.g. gemm_hit) once more under cProfile (<out-dir>/<run>/profile_warm.txt; "
                             "not part of the table)")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    args.out_dir = os.path.abspath(args.out_dir)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown or not args.variants:
        parser.error(f"--variants: unknown {unknown}; known: {', '.join(VARIANTS)}")
    os.makedirs(args.out_dir, exist_ok=True)

    def save(results: dict, skipped: list, final: bool = False) -> str:
        table = render(results, skipped, args) if results else ""
        with open(os.path.join(args.out_dir, "tunable_compile.json"), "w") as handle:
            json.dump({"results": results, "skipped": skipped, "complete": final}, handle, indent=1)
        with open(os.path.join(args.out_dir, "tunable_compile.md"), "w") as handle:
            handle.write(table if final else "(partial: the run is still going or was stopped)\n\n" + table)
        return table

    results, skipped = run_all(args, checkpoint=save)
    table = save(results, skipped, final=True)
    print(table)
    if not args.no_write:
        update_results_section(RESULTS, SECTION, "## Results cache: compile time on a warm results file\n\n" + table,
                               BENCHMARK_TITLE)


if __name__ == "__main__":
    main()
