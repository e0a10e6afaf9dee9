"""Collection throughput on one GPU vs every GPU of a host, and under torchrun.

Reads the ``.done.json`` summaries that ``gen_data_mm`` writes beside its log (one per run, renamed by the
job script) and the merged logs, and reports, per run, inputs with all choices timed per GPU-minute and
its ratio to the single-GPU run (target: at least 0.8 x GPUs for the whole run, i.e. 0.8 per GPU). Each merged
log is read with the data layer and its metadata checked against the single-GPU log (``merge_data``'s rule).

    python benchmarks/multigpu_collect.py --run "one GPU:1:one.done.json:one.txt" \
        --run "two workers:2:two.done.json:two.txt" --run "torchrun x2:2:tr.done.json:tr_merged.txt"

Ratios are fair only on the same work: ``gpu_jobs/multigpu.sh`` gives every run the same samples
(``--first-sample``/``--num-samples``, run to completion; a time limit only as a safety net), so each run times the same inputs. The table says
per run how many of its inputs the reference also timed, whether the run finished everything it planned,
and how its per-choice times agree with the reference's on the inputs both timed (ratio run / reference of
each (input, choice) median: a GPU that differs, or two workers that overlap, shows in it).
Writes its section of ``benchmarks/RESULTS.md`` (``<!-- BEGIN multigpu_collect -->``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from torchgen_ah.data.ah_log import input_keys, read_log
from torchgen_ah.data.merge import metadata_differences
from torchgen_ah.evaluation.results_section import publish
from torchgen_ah.evaluation.studies.run_agreement import compare, per_choice_medians

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
SECTION = "multigpu_collect"


def describe(name: str, gpus: int, done_path: str, log_path: str, reference_meta) -> dict:
    with open(done_path, encoding="utf-8") as f:
        done = json.load(f)
    minutes = done["seconds"] / 60.0
    log = read_log(log_path)
    differences = metadata_differences(reference_meta, log.metadata) if reference_meta is not None else []
    medians, _ = per_choice_medians(log_path)
    return {
        "medians": medians, "finished": finished(done),
        "name": name, "gpus": gpus, "ok": done["ok"], "failed": sum(done.get("failed", {}).values()),
        "excluded": done.get("excluded", 0), "minutes": minutes,
        "rate": done["ok"] / max(minutes * gpus, 1e-9),
        "inputs_in_log": int(input_keys(log.frame, log.metadata).nunique()) if len(log.frame) else 0,
        "metadata": log.metadata, "metadata_ok": not differences, "differences": differences,
    }


def finished(done: dict) -> bool:
    """The run timed everything it planned, itself: nothing interrupted or left unstarted by its time
    limit, and nothing skipped as already done by an earlier run (a resumed run's rate means nothing)."""
    return all(key in done for key in ("interrupted", "not_started", "skipped")) and not (
        done["interrupted"] or done["not_started"] or done["skipped"])


def agreement_cells(row: dict) -> str:
    """Inputs shared with the reference, then the per-choice time ratio over them ("-" for the reference)."""
    cells = f"{row['shared']} of {len(row['medians'])}"
    a = row["agreement"]
    if a is None:
        return cells + " | -"
    return cells + f" | {a['median']:.3f} ({a['p10']:.3f}-{a['p90']:.3f}) over {a['pairs']} pairs"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="NAME:GPUS:DONE_JSON:LOG (first = reference)")
    parser.add_argument("--gpu", default="", help="GPU description for the table header")
    parser.add_argument("--command", default="", help="the collection command, quoted in the section")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    rows, reference = [], None
    for spec in args.run:
        name, gpus, done_path, log_path = spec.split(":", 3)
        if not (os.path.exists(done_path) and os.path.exists(log_path)):
            print(f"{name}: no result ({done_path if not os.path.exists(done_path) else log_path} missing), "
                  "left out of the table", file=sys.stderr)
            continue
        row = describe(name, int(gpus), done_path, log_path, reference["metadata"] if reference else None)
        reference = reference or row
        row["per_gpu_vs_one"] = row["rate"] / reference["rate"] if reference["rate"] else float("nan")
        row["shared"] = len(set(row["medians"]) & set(reference["medians"]))
        row["agreement"] = compare(reference["medians"], row["medians"]) if row is not reference else None
        rows.append(row)
    if not rows:
        print("no run left a result", file=sys.stderr)
        return 1
    lines = ["## Collection across the GPUs of one host", ""]
    if args.gpu:
        lines += [f"{args.gpu}.", ""]
    if args.command:
        lines += [f"Command: `{args.command}`", ""]
    lines += [
        "| run | GPUs | inputs done | failed | excluded (cost cap) | wall min | inputs / GPU-minute "
        "| per-GPU rate vs one GPU | whole-run speed-up | finished all it planned | inputs also in the one-GPU log "
        "| per-choice time / one GPU: median (10th-90th pct) | metadata matches the one-GPU log |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['gpus']} | {r['ok']} | {r['failed']} | {r['excluded']} | {r['minutes']:.2f} "
            f"| {r['rate']:.2f} | {r['per_gpu_vs_one']:.2f} | {r['per_gpu_vs_one'] * r['gpus']:.2f}x "
            f"| {'yes' if r['finished'] else 'NO'} | {agreement_cells(r)} "
            f"| {'yes' if r['metadata_ok'] else 'NO: ' + '; '.join(r['differences'])} |")
    lines += ["", "Target: per-GPU rate at least 0.8 of the one-GPU rate (near-linear scaling), on the same inputs."]
    if not all(r["finished"] for r in rows):
        lines.append("A run that did not finish (its time limit stopped it, or it skipped inputs an earlier run had "
                     "done) did not time all of its inputs itself: its rate is not comparable.")
    return publish(RESULTS, SECTION, "\n".join(lines), write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
