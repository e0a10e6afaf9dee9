"""The compile-pool A/B: its report (torchgen_ah.evaluation.studies.compile_pool_report) on real H200 rows and journals with known changes
(every figure has a known answer), and gpu_jobs/compile_pool_ab.sh run through the real two_lanes.sh and
run_batch.sh with a stand-in collector, so both lanes' tarballs are checked to hold what the benchmark
reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from torchgen_ah.data.ah_log import read_log, write_log
from torchgen_ah.evaluation.studies import compile_pool_report as ab

ROOT = Path(__file__).resolve().parents[1]

SOURCE = ROOT / "datasets" / "h200" / "h200_hf_decode_mm.txt.gz"
JOURNAL = ROOT / "datasets" / "h200" / "h200_hf_decode_mm.txt.progress.jsonl"  # named after the plain log


def _arm(folder: Path, scale: float, seconds: float | None, parts=("decode", "random"),
         rep1_scale: float = 1.0) -> list[dict]:
    """An arm whose parts are the committed decoding GEMMs, each (input, choice) with its last repetition's
    time in every repetition, multiplied by `scale` (and the first repetition's by `rep1_scale` too); a
    part's run summary says `seconds` (None: no summary, as when the part was killed)."""
    folder.mkdir()
    log = read_log(SOURCE)
    frame = log.frame.copy()
    groups = frame.groupby(list(frame.columns.drop("feedback")), sort=False)
    first = groups.cumcount() == 0
    frame["feedback"] = groups["feedback"].transform("last") * scale * first.map({True: rep1_scale, False: 1.0})
    journal = [json.loads(line) for line in open(JOURNAL) if line.strip()]
    for part in parts:
        write_log(folder / f"{part}.txt", log.metadata, frame)
        (folder / f"{part}.txt.progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in journal))
        if seconds is not None:
            (folder / f"{part}.txt.done.json").write_text(json.dumps({"ok": len(journal), "seconds": seconds}))
    return journal


def test_rates_time_under_the_lock_and_agreement_have_their_known_values(tmp_path, capsys):
    if not SOURCE.exists():
        pytest.skip(f"H200 data absent: {SOURCE}")
    journal = _arm(tmp_path / "pool", 1.0, 240.0, rep1_scale=1.5)  # a slow first repetition
    _arm(tmp_path / "own", 0.9, 120.0, parts=("decode",))
    (tmp_path / "own" / "random.txt").write_bytes((tmp_path / "own" / "decode.txt").read_bytes())
    (tmp_path / "own" / "random.txt.progress.jsonl").write_bytes(
        (tmp_path / "own" / "decode.txt.progress.jsonl").read_bytes())  # killed: no random.txt.done.json

    body, fig = ab.report({"inductor": str(tmp_path / "pool"), "in-process": str(tmp_path / "own")}, "cmd")
    pool = fig[("decode", "inductor")]
    # each journaled batch holds two inputs sharing one compile_seconds: counted once
    assert pool["ok"] == len(journal) and pool["seconds"]["batches"] == len(journal) // 2
    assert pool["seconds"]["rep1"] == pytest.approx(sum(r["info"]["compile_seconds"][1] for r in journal) / 2)
    assert pool["seconds"]["rep2"] == pytest.approx(sum(r["info"]["compile_seconds"][2] for r in journal) / 2)
    assert pool["rate"] == pytest.approx(len(journal) / 4.0)
    assert fig[("decode", "speed")] == pytest.approx(2.0)  # same inputs in half the time
    agreement = fig[("decode", "agreement")]
    assert agreement["median"] == pytest.approx(0.9 / 1.25)  # own / the pool's median of 1.5x and 1x
    against_rep2 = fig[("decode", "agreement_rep2")]  # own / the pool's second repetition alone
    assert against_rep2["median"] == pytest.approx(0.9) and against_rep2["p10"] == pytest.approx(0.9)
    assert pool["spread"]["median"] == pytest.approx(1.5)  # the pool's rep 1 / rep 2
    assert fig[("random", "in-process")]["minutes"] is None and "killed: no .done.json" in body
    assert fig[("random", "speed")] is None

    journal_path = tmp_path / "pool" / "decode.txt.progress.jsonl"
    journal_path.write_text(journal_path.read_text() + "{not json\n")
    again, fig2 = ab.report({"inductor": str(tmp_path / "pool"), "in-process": str(tmp_path / "own")}, "cmd")
    assert f"{journal_path}:{len(journal) + 1}: unreadable journal line skipped" in capsys.readouterr().err
    assert again == body  # the corrupt line is skipped, nothing else is lost

    with pytest.raises(SystemExit, match="no decode.txt.progress.jsonl"):
        ab.report({"inductor": str(tmp_path), "in-process": str(tmp_path / "own")}, "cmd")


STUB = """#!/usr/bin/env bash
# stand-in python3: the collector writes what gen_data_mm writes; everything else is the real python
if [ "$1" = "-m" ] && [ "$2" = "torchgen_ah.mm.gen_data_mm" ]; then
  while [ $# -gt 0 ]; do
    case "$1" in -o) out=$2 ;; --compile-pool) pool=$2 ;; esac; shift
  done
  echo "rows" > "$out"; echo '{"index": 0, "status": "ok"}' > "$out.progress.jsonl"
  echo '{"seconds": 1.0}' > "$out.done.json"; mkdir -p "$out.workers"; echo "$pool" > "$out.workers/worker0.log"
  echo "mm: 1 inputs done" >&2; exit 0
fi
[ "$1" = "-m" ] && [ "$2" = "pip" ] && exit 0
if [ "$1" = "-" ]; then cat > /dev/null; echo "stand-in environment"; exit 0; fi
exec REAL "$@"
"""


def test_the_ab_job_packs_both_arms_where_the_benchmark_reads_them(tmp_path):
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    stub = stub_dir / "python3"
    stub.write_text(STUB.replace("REAL", sys.executable))
    stub.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PATH=f"{stub_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), MINUTES="0.5")
    proc = subprocess.run(["bash", "gpu_jobs/compile_pool_ab.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for lane, step, arm in (("a", "pool", "inductor"), ("b", "in_process", "in-process")):
        with tarfile.open(out / f"lane_{lane}.tgz") as tar:
            names = {n.lstrip("./") for n in tar.getnames()}
            for part in ("decode", "random"):
                for suffix in ("", ".progress.jsonl", ".done.json"):
                    assert f"{step}/{part}.txt{suffix}" in names, (lane, sorted(names))
            worker_log = tar.extractfile(f"./{step}/decode.txt.workers/worker0.log").read().decode().strip()
            assert worker_log == arm  # each lane ran its own --compile-pool
