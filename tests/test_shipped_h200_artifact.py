"""The shipped MMRankingH200 is the artifact its header's command trains from the committed replay-timed
H200 data, and it says it was trained on replay timings (so fast and quality modes trust its templates).

A stale artifact (the data grew, or a scikit-learn release moved a threshold) fails here: regenerate it with
the command in its header."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "artifacts" / "_MMRankingH200.py"


def _code(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]


def test_shipped_h200_artifact_is_what_the_committed_replay_data_trains(tmp_path):
    header = SHIPPED.read_text(encoding="utf-8").splitlines()[1]
    command = shlex.split(header.lstrip("#").strip())
    assert command[:3] == ["python", "-m", "torchgen_ah.mm.train_decision_mm"], header
    assert command[3] == "datasets/h200_replay/h200_replay_mm.txt.gz"  # replay-timed data, not the per-call logs
    argv = [a for a in command[3:] if a != "--into-package"] + ["--out", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.mm.train_decision_mm", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    trained = tmp_path / "_MMRankingH200.py"
    assert _code(trained) == _code(SHIPPED), "artifacts/_MMRankingH200.py is stale: regenerate it (its header)"
    assert "    timing = 'cudagraph_replay'" in _code(SHIPPED)
