"""benchmarks/l2_state.py on a machine without a GPU: its input checks and its refusal to measure."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "l2_state.py")
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import l2_state  # noqa: E402


def test_shapes_parse_and_bad_ones_are_named():
    assert l2_state.parse_shapes("64x2048x5632, 2048X2048x2048") == [(64, 2048, 5632), (2048, 2048, 2048)]
    with pytest.raises(ValueError, match="bad shape '64x2048': expected MxKxN"):
        l2_state.parse_shapes("64x2048")
    with pytest.raises(ValueError, match="bad shape '0x1x1'"):
        l2_state.parse_shapes("0x1x1")
    with pytest.raises(ValueError, match="no shape given"):
        l2_state.parse_shapes(" , ")


def test_cold_copies_exceed_twice_l2():
    l2 = 50 * 2**20
    for weight in (2048 * 2048 * 2, 2048 * 5632 * 2, 2048 * 32000 * 2):
        count = l2_state.copies_for(weight, l2)
        assert count >= 2 and (count * weight > 2 * l2 or count == l2_state.MAX_COPIES)


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--shapes", "64x64x64", "--json", str(out), "--no-write"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "needs a CUDA GPU" in proc.stderr
    assert not out.exists()
    bad = subprocess.run([sys.executable, SCRIPT, "--shapes", "64x64"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "bad shape '64x64'" in bad.stderr
