"""End to end on the CPU with real Inductor: frozen ``x @ self.w`` under
``torch.no_grad()`` and ``mode="max-autotune"`` autotunes ``packed_linear`` between the C++ GEMM
template and ``_mkl_linear``; the post-codegen hook and the feedback saver are the plugin's path.

One fresh subprocess, switched on by the environment alone, runs both phases (compiles are slow):
collect two shapes (with a policy that raises everywhere registered first), then prune with a real
policy object.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from linear_child import LINEAR, child_env

SCRIPT = r'''
import json, os, sys, warnings
warnings.simplefilter("always")
import torch
import ah_plugin
from ah_plugin.inductor import adapter as inductor
from ah_plugin.policy import ChoicePolicy, registry

assert inductor.is_installed(), "env var did not switch the plugin on"
import torch._inductor.config as ic
ic.freezing = True

class Raising(ChoicePolicy):
    def select(self, request):
        raise RuntimeError("select boom")
    def on_timings(self, request, timings, untimed):
        raise RuntimeError("timings boom")

class KeepCpp(ChoicePolicy):
    op_names = {"packed_linear"}
    def __init__(self):
        self.requests = []
    def select(self, request):
        self.requests.append((request.stage, list(request.candidates), dict(request.features)))
        return [c for c in request.candidates if c.startswith("cpp_")]
    def on_timings(self, request, timings, untimed):
        self.requests.append(("timings", sorted(timings), untimed))

''' + LINEAR + r'''
def run(m, k, n):
    torch.compiler.reset()
    mod = Linear(k, n)
    x = torch.randn(m, k)
    with torch.no_grad():
        out = torch.compile(mod, mode="max-autotune", dynamic=False)(x)
        return bool(torch.allclose(out, mod(x), rtol=1e-4, atol=1e-4))

result = {}
registry.register_policy(Raising(), registry.POSITION_CACHE)
result["collect_match"] = [run(16, 64, 32), run(48, 96, 80)]
stats = ah_plugin.status()["collect_stats"]
result["stats"] = [stats.inputs, stats.rows, stats.untimed]

# phase 2: collection off, a real policy prunes post-codegen; the raising one stays first
del os.environ["TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"]
ah_plugin.install()
keep = KeepCpp()
registry.register_policy(keep)
result["policies"] = ah_plugin.status()["policies"]
result["prune_match"] = run(24, 40, 56)
result["keep_requests"] = keep.requests
print("RESULT " + json.dumps(result))
'''


@pytest.mark.slow
def test_env_switch_collects_every_input_and_policies_are_guarded(tmp_path):
    log = tmp_path / "log.txt"
    env = child_env(
        TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="packed_linear",
        TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(log),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"),
    )
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])

    # outputs equal eager in both phases
    assert result["collect_match"] == [True, True] and result["prune_match"] is True
    # the raising policy was asked (select and on_timings) and only warned
    assert "select boom" in proc.stderr and "timings boom" in proc.stderr

    # the log: upstream metadata line, header, rows for every compiled input with all timed choices
    lines = log.read_text().splitlines()
    meta = json.loads(lines[0])
    assert meta["name"] == "packed_linear" and meta["device_capa"] == [0, 0] and meta["shared_memory"] == 0
    header = lines[1].split(",")
    assert header[-2:] == ["choice", "feedback"]
    rows = [dict(zip(header, l.split(","))) for l in lines[2:]]
    by_input = {}
    for row in rows:
        key = (row["in0_size_0"], row["in0_size_1"], row["in2_size_0"])
        by_input.setdefault(key, []).append(row)
    assert set(by_input) == {("16", "64", "32"), ("48", "96", "80")}
    for key, group in by_input.items():
        ids = [r["choice"] for r in group]
        assert len(ids) == len(set(ids)) == 2, ids
        assert "extern__mkl_linear" in ids and any(i.startswith("cpp_") for i in ids)
        assert all(0 < float(r["feedback"]) < float("inf") for r in group)
    assert result["stats"] == [2, 4, 0]

    # phase 2: post-codegen request with both candidates; one kept => nothing benchmarked
    assert result["policies"][0] == "Raising"
    (stage, candidates, features), = result["keep_requests"]
    assert stage == "post_codegen" and len(candidates) == 2
    assert features["in0_size_0"] == 24 and features["in0_dtype"] == "torch.float32"
