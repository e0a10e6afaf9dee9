"""Quality mode's fused-group decision (ah_plugin/inductor/patches/fusion_timing.py).

CPU: the decision (Inductor's stood in by a function doing what it does) runs under the replay plan with the
margin on the fused time only, Inductor's own decision elsewhere; the patch is on
``Scheduler.speedup_by_fusion`` exactly while the plugin is installed. GPU (marked, skipped without CUDA):
a bf16 ``gelu(x @ w + b)`` at decode size (64 rows) compiled in quality mode takes its fusion decision under the
plan, computes eager's result, and with a margin no fused kernel can win by keeps the group apart.
Where no template may be timed fused (the count at 0, fast mode's setting), the epilogue is not compiled and
timed alone: on the CPU with Inductor's decision stood in, on the GPU in a real compile.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
import torch
from torch._inductor import ir, scheduler

from ah_plugin.inductor import plans, session
from ah_plugin.inductor.patches import benchmarker as hooks

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Node:
    """Stands in for an Inductor scheduler node: what the wrapper reads of one (a template node holds a real,
    empty ``MultiTemplateBuffer``)."""

    def __init__(self, name: str, multi_template: bool, device: str = "cuda"):
        self.name, self.multi = name, ir.MultiTemplateBuffer.__new__(ir.MultiTemplateBuffer) if multi_template else None
        self.device = torch.device(device)

    def is_template(self):
        return self.multi is not None

    def get_template_node(self):
        return self.multi

    def get_nodes(self):
        return [self]

    def get_device(self):
        return self.device

    def get_name(self):
        return self.name


def _plan_in_force():
    timing = session.innermost(session.Timing)
    return timing.plan if timing is not None else None


@contextlib.contextmanager
def _inductor_stood_in(**methods):
    """``Scheduler``'s named methods replaced by stand-ins, with the plugin's wrapper installed over them; all
    restored afterwards (the wrapper as it was)."""
    from ah_plugin.inductor.patches import fusion_timing

    was_installed = "speedup_by_fusion" in fusion_timing._saved
    fusion_timing.uninstall()
    own = {name: getattr(scheduler.Scheduler, name) for name in methods}
    try:
        for name, stand_in in methods.items():
            setattr(scheduler.Scheduler, name, stand_in)
        fusion_timing.install()
        yield scheduler.Scheduler.__new__(scheduler.Scheduler)
    finally:
        fusion_timing.uninstall()
        for name, method in own.items():
            setattr(scheduler.Scheduler, name, method)
        if was_installed:
            fusion_timing.install()


def test_the_decision_runs_under_the_replay_plan_and_only_the_fused_time_carries_the_margin(monkeypatch):
    """Inductor's multi-template decision stood in by a function that does what it does (time the fused kernel
    through ``self.benchmark_codegened_module`` later, in the FusionResult's callable, and fuse when it beats
    the winner plus the neighbour: 2.9 against 2.0 + 1.0 ms). Under the wrapper with a 25% margin the decision
    runs under the replay plan and keeps the group apart (2.9 x 1.25 > 3.0); without a margin (not quality
    mode) it fuses, under no plan; the margin is gone from the scheduler afterwards; a pair without a
    multi-template node, and an error in Inductor's decision, go to Inductor once, untouched."""
    from ah_plugin.inductor.patches import fusion_timing

    seen, calls = [], []

    def inductor_decision(self, node1, node2):
        calls.append(node1.name)
        if node1.name == "raises":
            raise RuntimeError("Inductor's own error")
        seen.append(("eager", _plan_in_force()))

        def when_ready():
            seen.append(("deferred", _plan_in_force()))
            fused_ms, _ = self.benchmark_codegened_module(None, torch.device("cuda"))
            return fused_ms < 2.0 + 1.0

        return scheduler.FusionResult.from_callable(when_ready)

    margin = [0.25]
    monkeypatch.setattr(plans, "fusion_margin", lambda: margin[0])
    with _inductor_stood_in(speedup_by_fusion=inductor_decision,
                            benchmark_codegened_module=lambda self, module, device: (2.9, "fused.py")) as sched:
        before = fusion_timing.counts["apart"]
        result = sched.speedup_by_fusion(_Node("mm", True), _Node("gelu", False))
        assert result.callable_fn() is False and fusion_timing.counts["apart"] == before + 1
        assert [where for where, _ in seen] == ["eager", "deferred"]
        assert all(plan is not None and plan.timing == hooks.METHOD_REPLAY for _, plan in seen)
        assert "benchmark_codegened_module" not in vars(sched)  # the margin lasted the decision only
        assert sched.benchmark_codegened_module(None, None) == (2.9, "fused.py")
        seen.clear()
        margin[0] = None  # not quality mode: Inductor's own decision, its own timing
        assert sched.speedup_by_fusion(_Node("mm", True), _Node("gelu", False)).callable_fn() is True
        assert [plan for _, plan in seen] == [None, None]
        seen.clear()
        margin[0] = 0.25
        assert sched.speedup_by_fusion(_Node("add", False), _Node("relu", False)).callable_fn() is True
        assert [plan for _, plan in seen] == [None, None]
        calls.clear()
        with pytest.raises(RuntimeError, match="Inductor's own error"):
            sched.speedup_by_fusion(_Node("raises", True), _Node("gelu", False))
        assert calls == ["raises"]  # called once, never retried


def test_a_fusion_neighbour_is_not_timed_alone_where_no_fused_template_may_be_timed(monkeypatch):
    """Inductor's multi-template decision stood in by a function that does what it does: time the neighbour
    alone (``self.benchmark_fused_nodes``), walk the template choices fastest first, stopping where one alone
    is no faster than the winner plus the neighbour and once the count of fused templates is reached, and
    decline when none was tried (a tried one is taken as faster fused). At a count of 0 with the plugin on,
    the epilogue is answered uncompiled (the class's timing never runs) and the decision is the one Inductor
    takes timing it, apart, for an epilogue and a prologue (the template second) alike; at a count of 1, with
    the plugin not acting and on a CPU node, Inductor times it as before. A timing the scheduler instance already had is
    its own again afterwards."""
    import torch._inductor.config as inductor_config

    from ah_plugin.inductor.patches import fusion_timing, mode_options

    timed_alone = []
    entry = mode_options.fused_benchmarks_entry()

    def inductor_decision(self, node1, node2):
        ms1 = 1.5  # the autotuning's fastest choice alone
        ms2, _ = self.benchmark_fused_nodes(node2.get_nodes() if node1.is_template() else node1.get_nodes())
        tried = []
        for alone in (1.5, 1.8):  # the template choices' own times
            if alone >= ms1 + ms2 or len(tried) >= getattr(inductor_config, entry):
                break
            tried.append(alone)
        return scheduler.FusionResult.fuse(bool(tried))

    def class_timing(self, nodes):
        timed_alone.append(nodes[0].name)
        return 2.0, "epilogue.py"

    def decide(sched, *nodes):
        return sched.speedup_by_fusion(*nodes).should_fuse

    acting = [True]
    monkeypatch.setattr(plans, "fusion_margin", lambda: None)
    monkeypatch.setattr(plans, "acting", lambda: acting[0])
    with _inductor_stood_in(speedup_by_fusion=inductor_decision, benchmark_fused_nodes=class_timing) as sched:
        before = fusion_timing.untimed["neighbours"]
        with inductor_config.patch({entry: 0}):
            assert decide(sched, _Node("mm", True), _Node("relu", False)) is False
            assert decide(sched, _Node("cast", False), _Node("mm", True)) is False  # a prologue
            assert timed_alone == [] and fusion_timing.untimed["neighbours"] == before + 2
            assert "benchmark_fused_nodes" not in vars(sched)  # the stand-in lasted the decision only
            assert decide(sched, _Node("mm", True, "cpu"), _Node("relu", False, "cpu")) is False
            assert decide(sched, _Node("add", False), _Node("relu", False)) is False  # no template: Inductor's
            assert timed_alone == ["relu", "add"]
            acting[0] = False
            assert decide(sched, _Node("mm", True), _Node("relu", False)) is False  # Inductor's own: the same
            assert decide(sched, _Node("cast", False), _Node("mm", True)) is False
            assert timed_alone == ["relu", "add", "relu", "cast"]
            acting[0] = True
            own = sched.benchmark_fused_nodes = lambda nodes: (2.0, "instance.py")
            assert decide(sched, _Node("mm", True), _Node("relu", False)) is False
            assert sched.benchmark_fused_nodes is own  # the instance's own timing, back
        with inductor_config.patch({entry: 1}):
            del sched.benchmark_fused_nodes
            assert decide(sched, _Node("mm", True), _Node("relu", False)) is True
            assert timed_alone == ["relu", "add", "relu", "cast", "relu"]
        assert fusion_timing.untimed["neighbours"] == before + 3


def test_the_fusion_decision_is_wrapped_while_the_plugin_is_installed_and_restored_after():
    import ah_plugin.inductor.adapter as adapter

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


UNTIMED_CHILD = r'''
import json, os, torch
import ah_plugin
from torch._inductor import scheduler
import torch._inductor.config as inductor_config
from ah_plugin.inductor.patches import fusion_timing, mode_options
ah_plugin.require_active_from_environment()
setattr(inductor_config, mode_options.fused_benchmarks_entry(), int(os.environ["FUSED_COUNT"]))
if os.environ.get("INDUCTOR_TIMES_IT"):  # the counterfactual: Inductor's own decision, the epilogue timed
    fusion_timing._nothing_timed_fused = lambda: False
timed_alone, decisions = [], []
own = scheduler.Scheduler.benchmark_fused_nodes
def counted(self, *args, **kwargs):
    timed_alone.append(1)
    return own(self, *args, **kwargs)
scheduler.Scheduler.benchmark_fused_nodes = counted
decision = scheduler.Scheduler.speedup_by_fusion  # the plugin's wrapper, recorded from outside
def recorded(self, node1, node2):
    result = decision(self, node1, node2)
    if fusion_timing._multi_template(node1, node2):
        decisions.append([getattr(result, "should_fuse", result), getattr(result, "callable_fn", None) is None])
    return result
scheduler.Scheduler.speedup_by_fusion = recorded
torch.manual_seed(0)
x = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.randn(2048, 5632, device="cuda", dtype=torch.bfloat16) / 45
f = torch.compile(lambda x, w: torch.relu(x @ w), mode="max-autotune-no-cudagraphs")
out = f(x, w)
ref = torch.relu(x.float() @ w.float())
err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
print("RESULT " + json.dumps({"untimed": fusion_timing.untimed["neighbours"], "timed_alone": len(timed_alone),
                              "decisions": decisions, "error": err}))
'''


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_real_compile_times_no_epilogue_alone_where_no_fused_template_may_be_timed(tmp_path):
    """``relu(x @ w)`` at 64x2048x5632 with the top two candidates kept (a template beside aten on any GPU, so
    the GEMM is a multi-template and Inductor decides whether to fuse the ReLU). With the fused count at 0
    the plugin answers the ReLU's time alone uncompiled, Inductor's own timing of it never runs, and each
    decision is the one Inductor takes when it times the ReLU (the plugin's answer switched off): apart. At 1
    the ReLU is timed alone. All three compute eager's result."""
    results = {}
    for name, count, extra in (("untimed", 0, {}), ("inductor", 0, {"INDUCTOR_TIMES_IT": "1"}), ("one", 1, {})):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
        env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache_{name}"), PYTHONPATH=REPO,
                   TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_TOP_K="2", FUSED_COUNT=str(count), **extra)
        proc = subprocess.run([sys.executable, "-c", UNTIMED_CHILD], env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        results[name] = json.loads(line[len("RESULT "):])
    print(f"\n{results}")
    untimed, inductor, one = results["untimed"], results["inductor"], results["one"]
    assert untimed["untimed"] >= 1 and untimed["timed_alone"] == 0, results
    assert inductor["untimed"] == 0 and inductor["timed_alone"] >= 1, results
    assert untimed["decisions"] and untimed["decisions"] == inductor["decisions"], results
    assert all(d == [False, True] for d in untimed["decisions"]), results  # apart, decided at once
    assert one["untimed"] == 0 and one["timed_alone"] >= 1, results
    assert all(r["error"] < 2e-2 for r in results.values()), results
