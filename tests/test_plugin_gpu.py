"""GPU (Triton) path of the plugin core: COLLECT on bf16 shapes, parity with torch's built-in
collector's row, and pruning in the pre-codegen hook. Run on the device machine:
``bash gpu_jobs/plugin_tests.sh``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = [(1024, 1024, 1024), (2048, 512, 768), (384, 768, 3072)]

COMPILE = r'''
import json, os, sys, torch
import torch._inductor.config as ic
def run(m, k, n, transpose=False):
    torch.compiler.reset()
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs", dynamic=False)
    out = f(a, b)
    return bool(torch.allclose(out.float(), (a @ b).float(), rtol=2e-2, atol=2e-1))
'''

PLUGIN = COMPILE + r'''
import ah_plugin
from ah_plugin.inductor import adapter as inductor
from ah_plugin.policy import ChoicePolicy, registry
class Recorder(ChoicePolicy):
    op_names = {"mm"}
    def __init__(self): self.seen = []
    def select(self, request):
        self.seen.append(("select", request.stage, list(request.candidates)))
        if os.environ.get("KEEP_TWO"):
            triton = [c for c in request.candidates if c.startswith("type=triton_")]
            return ["extern_mm"] + triton[:1]
        return None
    def on_timings(self, request, timings, untimed):
        self.seen.append(("timings", request.features["m"], sorted(timings), untimed))
rec = ah_plugin.register_policy(Recorder(), registry.POSITION_CACHE)  # the adapter's hooks in, whatever the environment
shapes = json.loads(sys.argv[1])
matches = [run(*s) for s in shapes]
print("RESULT " + json.dumps({"matches": matches, "seen": rec.seen, "installed": inductor.is_installed()}))
'''

BUILTIN = COMPILE + r'''
shapes = json.loads(sys.argv[1])
print("RESULT " + json.dumps({"matches": [run(*s) for s in shapes]}))
'''


def _run(script, shapes, tmp_path, **extra_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env.update(PYTHONPATH=REPO, **extra_env)
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(shapes)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), proc.stderr


def _read(path):
    lines = open(path).read().splitlines()
    header = lines[1].split(",")
    return json.loads(lines[0]), [dict(zip(header, l.split(","))) for l in lines[2:]]


def test_collect_logs_every_shape_and_matches_builtin_row(tmp_path):
    ours = tmp_path / "ours.txt"
    result, _ = _run(PLUGIN, SHAPES, tmp_path,
                     TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm", TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(ours),
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "c1"), AH_PLUGIN_SEARCH_SAMPLE="6")
    assert result["installed"] and all(result["matches"])
    meta, rows = _read(ours)
    timings = [s for s in result["seen"] if s[0] == "timings"]
    assert len(timings) == len(SHAPES)
    for _, m, timed, untimed in timings:
        logged = sorted(r["choice"] for r in rows if int(r["m"]) == m)
        assert logged == timed, (m, untimed)  # every timed choice, once; untimed ones left out
        assert len(timed) >= 10  # default space plus the sampled wider configs
    print("untimed per shape:", [len(t[3]) for t in timings])

    builtin = tmp_path / "builtin.txt"
    _run(BUILTIN, SHAPES[:2], tmp_path, TORCH_DEVICE_BACKEND_AUTOLOAD="0",
         TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm", TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(builtin),
         TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "c2"))
    if not builtin.exists():
        pytest.fail("the built-in collector logged none of 2 shapes (it drops shapes with an untimed choice)")
    bmeta, brows = _read(builtin)
    assert {k: bmeta[k] for k in ("shared_memory", "device_capa", "name")} == \
           {k: meta[k] for k in ("shared_memory", "device_capa", "name")}
    assert set(bmeta["numerical_features"]) == set(meta["numerical_features"])
    assert set(bmeta["categorical_features"]) == set(meta["categorical_features"])
    feature_cols = bmeta["numerical_features"] + bmeta["categorical_features"]
    b_row = brows[0]
    ours_same = [r for r in rows if all(r[c] == b_row[c] for c in feature_cols)]
    assert ours_same, f"no row of ours has the built-in's features {[b_row[c] for c in feature_cols]}"
    shared = {r["choice"] for r in ours_same} & {r["choice"] for r in brows if r["m"] == b_row["m"]}
    assert "extern_mm" in shared and any(c.startswith("type=triton_") for c in shared)


def test_pre_codegen_hook_prunes_before_codegen(tmp_path):
    result, _ = _run(PLUGIN, SHAPES[:1], tmp_path, KEEP_TWO="1",
                     TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "c3"))
    assert all(result["matches"])
    selects = [s for s in result["seen"] if s[0] == "select"]
    assert selects and all(stage == "pre_codegen" for _, stage, _ in selects), selects
    assert len(selects[0][2]) > 2
    timed = [s for s in result["seen"] if s[0] == "timings"]
    assert len(timed) == 1 and len(timed[0][2]) == 2 and "extern_mm" in timed[0][2]
