"""Quality mode's fused-group decision (ah_plugin/inductor/patches/fusion_timing.py).

CPU: the margin reaches the times Inductor's real benchmarker returns under a plan, and the patch is on
``Scheduler.speedup_by_fusion`` exactly while the plugin is installed. GPU (marked, skipped without CUDA):
a bf16 ``gelu(x @ w + b)`` at decode size (64 rows) compiled in quality mode takes its fusion decision under the
plan, computes eager's result, and with a margin no fused kernel can win by keeps the group apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from torch._inductor import scheduler
from torch._inductor.runtime.benchmarking import benchmarker

from ah_plugin.inductor.patches import benchmarker as hooks

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sleep_2ms():
    time.sleep(0.002)


def test_a_plans_scale_multiplies_the_time_the_benchmarker_returns():
    """The fused kernel's time counts 1 + margin times: a 2 ms callable timed under a plan of scale 3 reads
    at least 6 ms, and at most 5 ms without the plan (the same real benchmarker, same callable)."""
    hooks.install()
    try:
        plain = benchmarker.benchmark_cpu(_sleep_2ms, warmup=1, rep=20)
        token = hooks._active.set(hooks.Plan(scale=3.0))
        try:
            scaled = benchmarker.benchmark_cpu(_sleep_2ms, warmup=1, rep=20)
        finally:
            hooks._active.reset(token)
    finally:
        hooks.uninstall()
    assert 2.0 <= plain < 5.0, plain
    assert scaled >= 6.0, (plain, scaled)


def test_the_fusion_decision_is_wrapped_while_the_plugin_is_installed_and_restored_after():
    import ah_plugin.inductor as adapter

    was_installed = adapter.is_installed()
    adapter.uninstall()
    try:
        bare = scheduler.Scheduler.speedup_by_fusion
        adapter.install()
        wrapped = scheduler.Scheduler.speedup_by_fusion
        assert wrapped is not bare and wrapped.__wrapped__ is bare
        adapter.uninstall()
        assert scheduler.Scheduler.speedup_by_fusion is bare
    finally:
        if was_installed:
            adapter.install()


CHILD = r'''
import json, sys, torch
import ah_plugin
from ah_plugin.inductor.patches import fusion_timing
ah_plugin.require_active_from_environment()
torch.manual_seed(0)
x = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(2048, 5632, device="cuda", dtype=torch.bfloat16) / 45
b = torch.randn(5632, device="cuda", dtype=torch.bfloat16)
f = torch.compile(lambda x, w, b: torch.nn.functional.gelu(x @ w + b), mode="max-autotune-no-cudagraphs")
out = f(x, w, b)
ref = torch.nn.functional.gelu((x.float() @ w.float()) + b.float())
err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
print("RESULT " + json.dumps({"counts": dict(fusion_timing.counts), "error": err}))
'''


def _child(tmp_path, name, **env_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache_{name}"), PYTHONPATH=REPO,
               TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K="quality", **env_vars)
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_quality_mode_decides_the_fused_group_under_the_plan_and_a_huge_margin_keeps_it_apart(tmp_path):
    """Quality mode keeps Triton templates beside aten on this decode-sized GEMM (64x2048x5632, where the
    best template comes within 10% of cuBLAS on an H200), so Inductor decides whether to fuse the bias and GELU
    into one: that decision runs under the plan. With the margin at 100% (the fused kernel must run in half the group's time) it is kept apart.
    Both compiles compute eager's result."""
    normal = _child(tmp_path, "normal")
    apart = _child(tmp_path, "apart", AH_PLUGIN_ATEN_MARGIN="1.0")
    print(f"\nnormal margin: {normal}\nmargin 100%: {apart}")
    assert sum(normal["counts"].values()) >= 1, "no fused-group decision was taken under the plan"
    assert apart["counts"].get("fused", 0) == 0 and apart["counts"].get("apart", 0) >= 1, apart
    assert normal["error"] < 2e-2 and apart["error"] < 2e-2, (normal, apart)
