"""``python -m torchgen_ah.compile_cost`` in a real subprocess, as the tests run it: a shapes file of the
given rows, no caller's Inductor or plugin variables, this checkout first on the path."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "op,m,k,n,batch,dtype,layout\n"


def clean_env() -> dict:
    """The environment without Inductor's or the plugin's variables, with this checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env["PYTHONPATH"] = REPO
    return env


def run_compile_cost(tmp_path, rows: list[str], *args: str):
    """Run compile_cost on ``rows`` (CSV lines without the header) with ``args``, output under
    ``tmp_path/out``; fails the test with the run's output tail when it exits non-zero. Returns the folder."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text(HEADER + "".join(row + "\n" for row in rows))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.compile_cost", str(shapes), *args, "--out", str(out)],
                          env=clean_env(), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out
