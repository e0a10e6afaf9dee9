"""benchmarks/compile_pool_ab.py on real collector output: a CPU gen_data_mm run is the pool arm and a copy
of it the in-process arm, so every figure has a known answer (equal rates, agreement exactly 1), a part
neither arm ran is reported as such, and a corrupt journal line is skipped with a warning naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import compile_pool_ab as ab  # noqa: E402


@pytest.mark.slow
def test_compile_pool_ab_reads_two_real_arms(tmp_path, capsys):
    pool = tmp_path / "inductor"
    pool.mkdir()
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n32,64,48,0,0,fp32,0\n"
                      "16,128,40,0,0,fp32,0\n")
    cmd = [sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--device", "cpu", "--shapes", str(shapes),
           "-o", str(pool / "decode.txt"), "--num-reps", "2", "--batch-size", "2", "--no-progress",
           "--timeout-per-sample", "120", "--warmup-reps", "1", "--warmup-mode", "compile"]
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_AUTOHEURISTIC_USE", "AH_DATAGEN_INJECT_FAULT")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = tmp_path / "in_process"
    shutil.copytree(pool, own)

    body, figures = ab.report({"inductor": str(pool), "in-process": str(own)}, "cmd")
    got = figures[("decode", "inductor")]
    assert got["ok"] == 2 and got["compile_threads"] == "1"
    assert got["seconds"]["batches"] == 1  # the two inputs shared one compiled graph: counted once
    assert got["seconds"]["rep1"] > 0 and got["seconds"]["rep2"] > 0 and got["seconds"]["warmup"] > 0
    assert figures[("decode", "speed")] == pytest.approx(1.0)
    agreement = figures[("decode", "agreement")]
    assert agreement["median"] == pytest.approx(1.0) and agreement["p10"] == pytest.approx(1.0)
    assert figures[("random", "inductor")] is None and "not run" in body
    assert body.count("| decoding GEMMs") == 3  # a row per arm and the agreement row

    journal = pool / "decode.txt.progress.jsonl"
    journal.write_text(journal.read_text() + "{not json\n")
    again, figures = ab.report({"inductor": str(pool), "in-process": str(own)}, "cmd")
    assert f"{journal}:3: unreadable journal line skipped" in capsys.readouterr().err
    assert again == body and figures[("decode", "inductor")]["ok"] == 2  # skipped, nothing else lost
