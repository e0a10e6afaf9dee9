"""benchmarks/multigpu_collect.py, run as a script, on real H200 log rows: the per-GPU rate, the inputs shared with the
one-GPU run, the per-choice agreement on them, the "finished" flag and the metadata check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchgen_ah.data.ah_log import input_keys, read_log, write_log

ROOT = Path(__file__).resolve().parents[1]

SOURCE = ROOT / "datasets" / "h200" / "h200_mm.txt.gz"


def _runs(tmp_path: Path, scale: float, metadata_change: dict | None = None):
    """A one-GPU log of 4 real inputs and a two-GPU log of 3 of them with every time multiplied by `scale`."""
    if not SOURCE.exists():
        pytest.skip(f"H200 data absent: {SOURCE} not found")
    log = read_log(SOURCE)
    keys = input_keys(log.frame, log.metadata)
    chosen = list(dict.fromkeys(keys))[:4]
    one = log.frame[keys.isin(chosen)]
    two = log.frame[keys.isin(chosen[:3])].copy()
    two["feedback"] = two["feedback"] * scale
    write_log(tmp_path / "one.txt", log.metadata, one)
    write_log(tmp_path / "two.txt", {**log.metadata, **(metadata_change or {})}, two)
    (tmp_path / "one.json").write_text(json.dumps({"ok": 4, "seconds": 120.0, "excluded": 1, "interrupted": 0,
                                                    "not_started": 0, "skipped": 0}))
    (tmp_path / "two.json").write_text(json.dumps({"ok": 3, "seconds": 60.0, "interrupted": 1, "not_started": 0,
                                                    "skipped": 0}))
    return [f"one GPU:1:{tmp_path / 'one.json'}:{tmp_path / 'one.txt'}",
            f"two workers:2:{tmp_path / 'two.json'}:{tmp_path / 'two.txt'}"]


def _run(specs) -> subprocess.CompletedProcess:
    argv = [a for spec in specs for a in ("--run", spec)] + ["--no-write"]
    proc = subprocess.run([sys.executable, "benchmarks/multigpu_collect.py", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _table(specs) -> str:
    return _run(specs).stdout


def _row(text: str, name: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_rates_shared_inputs_and_agreement(tmp_path):
    text = _table(_runs(tmp_path, scale=1.05))
    one, two = _row(text, "one GPU"), _row(text, "two workers")
    assert one[6] == "2.00" and one[9] == "yes" and one[10] == "4 of 4" and one[11] == "-"
    # 3 inputs in 1 minute on 2 GPUs = 1.5 per GPU-minute, 0.75 of the one-GPU rate, 1.5x the whole run
    assert two[6] == "1.50" and two[7] == "0.75" and two[8] == "1.50x"
    assert two[9] == "NO" and "not comparable" in text
    assert two[10] == "3 of 3"
    assert two[11].startswith("1.050 (1.050-1.050) over ")
    assert two[12] == "yes"


def test_metadata_difference_is_named(tmp_path):
    text = _table(_runs(tmp_path, scale=1.0, metadata_change={"shared_memory": 1}))
    two = _row(text, "two workers")
    assert two[12].startswith("NO: ") and "shared_memory" in two[12]
    assert two[11].startswith("1.000 (1.000-1.000)")


def test_a_run_without_results_is_left_out_and_an_older_summary_is_not_finished(tmp_path):
    """A run whose files are missing (torchrun wrote nothing) costs only its own row; a summary without the
    interrupted/not_started/skipped counts (older runner) is not taken as finished."""
    specs = _runs(tmp_path, scale=1.0)
    (tmp_path / "one.json").write_text(json.dumps({"ok": 4, "seconds": 120.0}))
    proc = _run(specs + [f"torchrun:2:{tmp_path / 'missing.json'}:{tmp_path / 'missing.txt'}"])
    text = proc.stdout
    assert "torchrun" not in text and "missing.json missing" in proc.stderr
    assert _row(text, "one GPU")[9] == "NO"
