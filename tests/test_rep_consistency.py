"""Repetition consistency (torchgen_ah.evaluation.studies.rep_consistency and its command line,
benchmarks/rep_consistency.py) on a real log file written by the collector's row format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ah_plugin.collect.log_format import append_rows, format_row
from torchgen_ah.evaluation.studies import rep_consistency as rc
from mm_log_meta import MM_LOG_METADATA

ROOT = Path(__file__).resolve().parents[1]

META = dict(MM_LOG_METADATA)


def feats(m, k, n):
    return {"m": m, "k": k, "n": n, "mat1_stride_0": k, "mat1_stride_1": 1, "mat2_stride_0": n,
            "mat2_stride_1": 1, "mat1_dtype": "torch.bfloat16", "mat2_dtype": "torch.bfloat16",
            "mat1_iscontig": True, "mat2_iscontig": True, "using_tf32": "not_float_32"}


def write(path: Path, reps: dict[tuple[int, int, int], list[dict[str, float]]]) -> None:
    """Each input's repetitions in order, as the collector appends them (one block of rows per rep)."""
    for shape, per_rep in reps.items():
        for times in per_rep:
            append_rows(str(path), META, [format_row(META, feats(*shape), c, t) for c, t in times.items()])


def test_pick_regret_and_buckets(tmp_path):
    log = tmp_path / "log.txt"
    write(log, {
        (4096, 4096, 4096): [{"a": 1.0, "b": 1.2, "c": 1.5}, {"a": 1.01, "b": 1.19, "c": 1.5}],  # stable
        (64, 64, 64): [{"a": 0.010, "b": 0.012}, {"a": 0.020, "b": 0.012}],  # tiny: the pick flips
        (512, 512, 512): [{"a": 0.5, "b": 0.6}],  # one repetition only: not scored
        (2048, 2048, 2048): [{"a": 0.3, "b": float("inf")}, {"a": 0.3, "b": 0.4}],  # a failed time
    })
    lines, table = rc.report(str(log), [("first two", 0, 10), ("rest", 10, None)])
    big = table[("first two", "best >= 50 us")]
    assert big["inputs"] == 1 and big["same_pick"] == 1 and big["regret_gmean"] == pytest.approx(1.0)
    tiny = table[("first two", "best < 50 us")]
    assert tiny["inputs"] == 1 and tiny["same_pick"] == 0
    assert tiny["regret_max"] == pytest.approx(0.020 / 0.012)  # rep 1 picked a; under rep 2 it is 0.020
    # the 512 input (one rep) and the 2048 one (only one choice with two finite times) are not scored
    assert table[("rest", "best >= 50 us")]["inputs"] == 0
    assert any(line.startswith("| first two | best < 50 us | 1 | 0 |") for line in lines)


def test_cli_errors_name_the_problem(tmp_path):
    missing = subprocess.run([sys.executable, "benchmarks/rep_consistency.py", str(tmp_path / "none.txt")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "none.txt" in missing.stderr
    log = tmp_path / "log.txt"
    write(log, {(4096, 4096, 4096): [{"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}]})
    bad = subprocess.run([sys.executable, "benchmarks/rep_consistency.py", str(log), "--part", "x=a:b"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "START and END must be integers" in bad.stderr
    ok = subprocess.run([sys.executable, "benchmarks/rep_consistency.py", str(log)],
                        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "| all rows | best >= 50 us | 1 | 1 | 1.0000 |" in ok.stdout
