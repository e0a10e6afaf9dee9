"""The ceiling of quality mode's single-GEMM bar: what a perfect pick among today's candidates would reach
against min(max-autotune off, default max-autotune), per GEMM.

    python -m torchgen_ah.evaluation.studies.quality_ceiling KERNELS.jsonl [...] \\
        [--log datasets/h200_replay/h200_replay_mm.txt.gz ...] [--results benchmarks/RESULTS.md] [--json OUT]

Quality mode's bar (issue: kernels that beat cuBLAS) asks for a geomean 1.05x faster than min(off, default)
per GEMM, none slower than 1.01x. Selection cannot run a kernel that is not a candidate, so the best it can
do on a GEMM is the fastest of: off's compiled kernel, default's, and the fastest template candidate.
Inputs, all replay-timed on one GPU:

* ``KERNELS.jsonl``: ``torchgen_ah.compile_cost`` per-shape lines (``mode``, ``shape``, ``replay_ms``): the
  compiled function's kernel per mode, medians over the mode's processes (``kernel_times.kernel_rows``);
  shapes where both off and default were timed;
* ``--log``: collection logs timed by replay over the quality space (every default candidate, the
  persistent TMA template, decompose-K): the fastest template per GEMM, matched by ``MxKxN dtype layout``.

Per GEMM: ceiling = min(off, default, best template) / min(off, default); 1.0: no candidate beats what off
or default already run. The template's time comes from the collection's process, the modes' from
compile_cost's, both by replay: where a process runs the same kernel a percent or two apart, so does this.
Shapes without a logged template are left out and counted.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.studies.fast_heldout import describe
from torchgen_ah.evaluation.json_lines import read_json_lines
from torchgen_ah.evaluation.kernel_times import QUALITY_BAR_GEOMEAN, QUALITY_BAR_WORST, kernel_rows
from torchgen_ah.evaluation.results_section import publish_report

PROG = "python -m torchgen_ah.evaluation.studies.quality_ceiling"
SECTION = "quality_ceiling"
TITLE = "### Quality mode's single-GEMM ceiling: a perfect pick against min(off, default)"
DEFAULT_LOGS = ("datasets/h200_replay/h200_replay_mm.txt.gz", "datasets/h200_replay/h200_replay_unaligned_mm.txt.gz")


def read_kernel_lines(paths: list[str]) -> list[dict]:
    """compile_cost's per-shape lines; ValueError naming the file and line of a bad one."""
    return [row for path in paths for row in read_json_lines(path, ("mode", "shape"), "a compile_cost line")]


def best_templates(log_paths: list[str]) -> dict:
    """{``MxKxN dtype layout``: the fastest template candidate's time in ms} over the logs (the minimum where
    a GEMM is in several)."""
    from torchgen_ah.mm import train_decision_mm

    out: dict = {}
    for path in log_paths:
        table, _ = train_decision_mm.load_table([path], "quality_ceiling")
        templates = [j for j, c in enumerate(table.choices) if not c.startswith("extern")]
        for i in range(len(table.keys)):
            times = table.times[i][templates]
            times = times[np.isfinite(times) & (times > 0)]
            if times.size:
                key = describe(dict(table.features.iloc[i].items()))
                out[key] = min(out.get(key, np.inf), float(times.min()))
    return out


def ceiling_rows(kernel_lines: list[dict], templates: dict) -> tuple[list[dict], list[str]]:
    """(per GEMM with off, default and a logged template: the times in us and the ceiling; the shapes left
    out for want of a logged template)."""
    rows, missing = [], []
    for row in kernel_rows(kernel_lines):
        if not row.get("off") or not row.get("default"):
            continue
        key = row["shape"].split(" ", 1)[1] if " " in row["shape"] else row["shape"]
        if key not in templates:
            missing.append(row["shape"])
            continue
        base = min(row["off"], row["default"])
        best = min(base, templates[key])
        rows.append({"shape": row["shape"], "off_us": row["off"] * 1000, "default_us": row["default"] * 1000,
                     "template_us": templates[key] * 1000, "ceiling": best / base,
                     "fast_vs_best": row.get("fast_vs_best"), "quality_vs_best": row.get("quality_vs_best")})
    return rows, missing


def summary(rows: list[dict]) -> dict:
    ceilings = [r["ceiling"] for r in rows]
    return {"gemms": len(rows), "geomean": geomean(ceilings), "best": min(ceilings),
            "gemms_at_bar": sum(c <= QUALITY_BAR_GEOMEAN for c in ceilings),
            "bar_geomean": QUALITY_BAR_GEOMEAN, "bar_worst": QUALITY_BAR_WORST}


def markdown(rows: list[dict], missing: list[str], command: str, sources: str) -> str:
    s = summary(rows)
    lines = [f"Command: `{command}`", "", sources, "",
             f"{s['gemms']} GEMMs with off, default and a logged template. A perfect pick among today's "
             f"candidates reaches **{s['geomean']:.3f}x** min(off, default) on the geomean (bar: "
             f"{s['bar_geomean']:.3f}x, i.e. 1.05x faster), at best {s['best']:.3f}x on one GEMM; "
             f"{s['gemms_at_bar']} of {s['gemms']} reach 1.05x faster." +
             (f" Left out, no logged template: {', '.join(missing)}." if missing else ""), "",
             "| GEMM | off us | default us | best template us | ceiling | fast / min(off, default) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: r["ceiling"]):
        fast = f"{r['fast_vs_best']:.3f}" if r.get("fast_vs_best") else "-"
        lines.append(f"| {r['shape']} | {r['off_us']:.1f} | {r['default_us']:.1f} | {r['template_us']:.1f} | "
                     f"{r['ceiling']:.3f} | {fast} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", help="compile_cost per-shape JSON lines with off and default")
    parser.add_argument("--log", action="append", help="replay-timed collection log over the quality space "
                        f"(repeatable; default: {', '.join(DEFAULT_LOGS)})")
    parser.add_argument("--results", help="also write the quality_ceiling section of this markdown file")
    parser.add_argument("--json", help="write the rows and the summary here")
    args = parser.parse_args(argv)
    logs = args.log or list(DEFAULT_LOGS)
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        rows, missing = ceiling_rows(read_kernel_lines(args.kernels), best_templates(logs))
    except (OSError, ValueError) as exc:
        print(f"quality_ceiling: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(f"quality_ceiling: no GEMM of {', '.join(args.kernels)} has off, default and a template in "
              f"{', '.join(logs)}", file=sys.stderr)
        return 1
    sources = (f"Modes' kernels: {', '.join(f'`{p}`' for p in args.kernels)} (medians over processes); "
               f"templates: {', '.join(f'`{p}`' for p in logs)}.")
    text = f"{TITLE}\n\n" + markdown(rows, missing, command, sources)
    return publish_report(text, {"rows": rows, "missing": missing, "summary": summary(rows)}, SECTION, args.json,
                          args.results)


if __name__ == "__main__":
    sys.exit(main())
