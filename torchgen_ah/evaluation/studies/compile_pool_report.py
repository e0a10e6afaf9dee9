"""Collection with Inductor's compile subprocess pool against compiling in the worker (gen_data_mm
--compile-pool), on the same inputs: throughput, where the time under the device lock goes, and whether
the timings agree.

Why: once Inductor's subprocess pool is up, a worker loads every candidate again in its first logged
repetition, under the device lock, although the compile-only warm-up built them (docs/datagen.md, "Compile
pool"). This reads the two arms of ``gpu_jobs/compile_pool_ab.sh`` (each a folder with ``decode.txt`` and
``random.txt``, their journals and ``.done.json`` summaries) and reports, per part and arm: inputs done, wall
minutes and inputs per GPU-minute; the seconds of the warm-ups and of the first and second logged
repetitions (summed over batches, from the journals); then the per-choice agreement of the two arms on the
(input, choice) pairs both timed, also against the pool arm's second repetition alone (its first one
rebuilds kernels between timings), beside each arm's own repetition-to-repetition spread.

``benchmarks/compile_pool_ab.py`` is the command line.
"""

from __future__ import annotations

import json
import os

from torchgen_ah.datagen.benchmark_runner import BenchmarkRunner
from torchgen_ah.evaluation.studies.run_agreement import (compare, per_choice_medians, repetition_spread,
                                                         repetition_times)

PARTS = (("decode", "decoding GEMMs (default's candidates)"),
         ("random", "random inputs (wide space, 20 sampled configs)"))
ARMS = (("inductor", "Inductor's subprocess pool"), ("in-process", "in the worker's threads"))


def batch_seconds(records: list[dict]) -> dict:
    """Seconds summed over batches (a batch's inputs share one ``compile_seconds``): warm-ups, first and
    second logged repetitions, and time holding the device lock."""
    seen = set()
    out = {"batches": 0, "warmup": 0.0, "rep1": 0.0, "rep2": 0.0, "lock_held": 0.0}
    for r in records:
        info = r.get("info") or {}
        seconds = info.get("compile_seconds") or []
        if r.get("status") != "ok" or len(seconds) < 3:
            continue
        key = (r.get("device"), tuple(seconds), info.get("lock_held_seconds"))
        if key in seen:
            continue
        seen.add(key)
        out["batches"] += 1
        out["warmup"] += sum(seconds[:-2])
        out["rep1"] += seconds[-2]
        out["rep2"] += seconds[-1]
        out["lock_held"] += info.get("lock_held_seconds") or 0.0
    return out


def arm_part(folder: str, part: str) -> dict | None:
    """One arm's figures for one part; None when the arm has no journal for it. A part without its
    ``.done.json`` (killed before the summary) keeps its journal's figures, with no wall time."""
    log = os.path.join(folder, f"{part}.txt")
    journal, done = log + ".progress.jsonl", log + ".done.json"
    if not os.path.exists(journal):
        return None
    minutes = None
    if os.path.exists(done):
        try:
            with open(done, encoding="utf-8") as fh:
                minutes = float(json.load(fh)["seconds"]) / 60
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"compile_pool_ab: {done}: not a run summary with 'seconds' ({exc!r})") from exc
    records = list(BenchmarkRunner.read_journal(journal).values())  # a corrupt line: warned, skipped
    ok = sum(1 for r in records if r.get("status") == "ok")
    threads = sorted({f"{info.get('compile_threads')} / {info.get('precompile_threads')}"
                      for info in ((r.get("info") or {}) for r in records) if "compile_threads" in info})
    return {"ok": ok, "minutes": minutes, "rate": ok / minutes if minutes else None,
            "seconds": batch_seconds(records), "medians": per_choice_medians(log)[0],
            "rep2": repetition_times(log, 1),
            "spread": repetition_spread(log), "compile_threads": ", ".join(threads) or "not recorded"}


def _range(stats) -> str:
    if not stats:
        return "n/a"
    return f"{stats['median']:.3f} ({stats['p10']:.3f}-{stats['p90']:.3f}, {stats['pairs']} pairs)"


def report(folders: dict[str, str], command: str) -> tuple[str, dict]:
    """The markdown section and the figures (for tests): folders maps arm -> folder. SystemExit when an
    arm's folder holds neither part (a folder one level too high, say)."""
    figures: dict = {}
    for arm, _ in ARMS:
        for part, _ in PARTS:
            figures[(part, arm)] = arm_part(folders[arm], part)
        if all(figures[(part, arm)] is None for part, _ in PARTS):
            names = ", ".join(f"{part}.txt.progress.jsonl" for part, _ in PARTS)
            raise SystemExit(f"compile_pool_ab: {folders[arm]}: no {names} (the {arm} arm's step folder?)")
    lines = ["## Compile pool: Inductor's subprocess pool or the worker's threads (gen_data_mm --compile-pool)", "",
             f"Command: `{command}` over the two arms of `gpu_jobs/compile_pool_ab.sh` (same inputs, one GPU "
             "and half the host's cores each: the pool arm on GPU 0, the in-process arm on GPU 1; two workers "
             "per GPU, 2 logged repetitions after a compile-only warm-up). Seconds are summed over batches "
             "from the journals.", "",
             "| part | arm | compile threads / precompile threads | inputs done | wall min | inputs per minute "
             "(one GPU) | batches | warm-up s | rep 1 s | rep 2 s | rep 1 s / rep 2 s | device lock held s |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for part, part_label in PARTS:
        for arm, arm_label in ARMS:
            got = figures[(part, arm)]
            if got is None:
                lines.append(f"| {part_label} | {arm_label} | | not run | | | | | | | | |")
                continue
            s = got["seconds"]
            ratio = f"{s['rep1'] / s['rep2']:.2f}" if s["rep2"] > 0 else "n/a"
            wall = f"{got['minutes']:.2f}" if got["minutes"] is not None else "killed: no .done.json"
            rate = f"{got['rate']:.2f}" if got["rate"] is not None else "n/a"
            lines.append(f"| {part_label} | {arm_label} | {got['compile_threads']} | {got['ok']} | {wall} | "
                         f"{rate} | {s['batches']} | {s['warmup']:.1f} | {s['rep1']:.1f} | {s['rep2']:.1f} | "
                         f"{ratio} | {s['lock_held']:.1f} |")
    lines += ["", "Kernel timings: per-choice medians of the in-process arm / the pool arm on the (input, choice) "
              "pairs both timed, median (10th-90th percentile), beside each arm's own rep 1 / rep 2 timing "
              "spread (its noise floor).", "",
              "| part | timings in-process / pool | in-process / pool's rep 2 alone | pool: timings rep 1 / rep 2 "
              "| in-process: timings rep 1 / rep 2 | rate in-process / pool |",
              "| --- | --- | --- | --- | --- | --- |"]
    for part, part_label in PARTS:
        pool, own = figures[(part, "inductor")], figures[(part, "in-process")]
        if pool is None or own is None:
            lines.append(f"| {part_label} | n/a | | | | |")
            continue
        agreement = compare(pool["medians"], own["medians"])
        figures[(part, "agreement")] = agreement
        against_rep2 = compare(pool["rep2"], own["medians"])
        figures[(part, "agreement_rep2")] = against_rep2
        speed = own["rate"] / pool["rate"] if own["rate"] and pool["rate"] else None
        figures[(part, "speed")] = speed
        lines.append(f"| {part_label} | {_range(agreement)} | {_range(against_rep2)} | {_range(pool['spread'])} | "
                     f"{_range(own['spread'])} | {f'{speed:.2f}x' if speed else 'n/a'} |")
    return "\n".join(lines), figures

