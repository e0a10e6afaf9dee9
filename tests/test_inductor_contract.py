"""The plugin's contract with Inductor (ah_plugin/inductor/contract.py), checked on the torch this runs on:
every hook of the table exists with the signature the plugin calls it with, a real compile on the CPU
reaches every hook the CPU path can reach, a GPU autotuning's candidates would be timed by the plugin's
replay (not per call), and the choices handler composes with other handlers. CI runs it on torch 2.13;
docs/inductor_versions.md has its results on 2.11, 2.14 and 2.15.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from ah_plugin.inductor import contract
from linear_child import child_env

TORCH = ".".join(torch.__version__.split(".")[:2])


@pytest.mark.parametrize("hook", contract.HOOKS, ids=lambda hook: hook.name)
def test_every_hook_is_present_as_the_plugin_calls_it(hook):
    assert TORCH in hook.checked_on, f"torch {TORCH} is not among the versions the contract was checked on"
    assert hook.probe() is None, f"{hook.name}: {hook.probe()}; the plugin would do without: {hook.without}"


def test_a_probe_names_what_moved():
    # a real function with other parameters, and a path that does not exist
    moved = contract._params("torch.nn.functional.relu", ("match", "mat1"))()
    assert moved and "torch.nn.functional.relu takes (input, inplace" in moved
    assert "not found" in contract._exists("torch._inductor.no_such_module.thing")()
    lines = contract.missing_lines({"mode_options": "torch._inductor.list_mode_options not found",
                                    "feedback": None})
    assert lines == ["fast and quality modes: mode='max-autotune' autotunes GEMMs only: off "
                     "(torch._inductor.list_mode_options not found); mode='max-autotune' keeps its tuning of "
                     "every kernel (compile time of default max-autotune's order)"]


REACH = r'''
import json, torch
import torch._inductor.config as inductor_config
import ah_plugin
from ah_plugin.inductor import contract

inductor_config.freezing = True
linear = torch.nn.Linear(64, 48).eval()
x = torch.randn(32, 64)
with torch.no_grad():
    # fast mode: mode="max-autotune" narrowed, an mm with a C++ template offered, its lowering redone as off
    with ah_plugin.enabled(use=["mm"]):
        torch.compile(lambda a, b: (a @ b).relu(), mode="max-autotune-no-cudagraphs")(x, torch.randn(64, 16))
        torch.compiler.reset()
    # quality mode's options (persistent TMA offered); compiled lazily, so nothing runs here
    with ah_plugin.enabled(use=["mm"], top_k="quality"):
        torch.compile(linear, mode="max-autotune-no-cudagraphs")
    # top-k mode with the results cache tuning within limits: both candidates benchmarked, timings fed back
    with ah_plugin.enabled(use=["mm"], top_k=10):
        torch.compile(linear, mode="max-autotune-no-cudagraphs")(x)
print(json.dumps(dict(contract.reached)))
'''


@pytest.mark.slow
def test_a_real_cpu_compile_reaches_every_hook_the_cpu_path_has(tmp_path):
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), AH_TUNABLE_ENABLED="1",
                    AH_TUNABLE_FILENAME=str(tmp_path / "results.csv"), AH_TUNABLE_MAX_TUNING_DURATION_MS="5")
    done = subprocess.run([sys.executable, "-c", REACH], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reached = json.loads(done.stdout.strip().splitlines()[-1])
    unreached = [hook.name for hook in contract.HOOKS if hook.cpu_reachable and not reached.get(hook.name)]
    assert not unreached, f"hooks a CPU compile never reached: {unreached} (reached: {reached})"


def test_gpu_candidates_are_timed_by_the_plugins_replay_on_this_torch():
    """What a GPU autotuning in fast mode gets on this torch: Inductor's own switch for replay timing is
    honoured only under max_autotune, which fast mode's options leave off, so the plugin's replay must be
    what ``benchmarker.benchmark`` reaches for a CUDA candidate. On the CPU the replay itself cannot run:
    the call must fail inside the plugin's replay, which shows the route."""
    import traceback

    import torch._inductor.config as inductor_config
    from torch._inductor.runtime import benchmarking

    from ah_plugin.inductor.patches import benchmarker, mode_options
    from ah_plugin.replay_timing import METHOD_REPLAY

    options = mode_options.narrowed({"max_autotune": True, "coordinate_descent_tuning": True,
                                     "triton.cudagraphs": True}, {"gemm_only": True})
    assert not options.get("max_autotune")
    if hasattr(inductor_config, "autotune_cudagraph_benchmarking"):
        assert not (inductor_config.autotune_cudagraph_benchmarking and options.get("max_autotune"))

    class Candidate:
        def benchmark(self):
            return benchmarking.benchmarker.benchmark(lambda: None, device=torch.device("cuda"))

    candidate = Candidate()
    benchmarker.with_plan([candidate], benchmarker.Plan(timing=METHOD_REPLAY))
    try:
        with pytest.raises(Exception) as raised:
            candidate.benchmark()
        frames = [frame.filename for frame in traceback.extract_tb(raised.value.__traceback__)]
        assert any(name.endswith("ah_plugin/replay_timing.py") for name in frames), frames
    finally:
        benchmarker.uninstall()


def test_the_choices_handler_composes_with_other_handlers():
    """Torch 2.15 composes registered handlers; earlier torches build one class from the configured one.
    Either way the plugin's pre-codegen hook is the one Inductor runs, beside another handler's overrides."""
    from torch._inductor import choices as inductor_choices
    from torch._inductor.choices import InductorChoices

    import ah_plugin
    from ah_plugin.inductor import choices as plugin_choices

    class Other(InductorChoices):
        def uuid(self):
            return "other"

        def customize_fused_kernel_name(self, fused_name, src_code):
            return fused_name + "_other"

    registered = plugin_choices.has_registry()
    if registered:
        inductor_choices.register_inductor_choices("test_other_a", Other)
        inductor_choices.register_inductor_choices("test_other_b", Other)
    from ah_plugin.inductor import adapter

    installed_before = adapter.is_installed()  # an earlier test of this process may have switched it on
    try:
        with ah_plugin.enabled(use=["mm"]):
            assert plugin_choices.hook_owner() == "PluginChoices"
            assert "ah_plugin:" in str(torch._inductor.virtualized.V.choices.uuid())
            if registered:
                assert torch._inductor.virtualized.V.choices.customize_fused_kernel_name("k", "") == "k_other"
        if not installed_before:
            assert plugin_choices.hook_owner() != "PluginChoices"
    finally:
        if registered:
            inductor_choices.unregister_inductor_choices("test_other_a")
            inductor_choices.unregister_inductor_choices("test_other_b")


def test_a_builtin_op_this_torch_dropped_is_named():
    """Torch 2.15's built-in AutoHeuristic has no mixed_mm: naming it must not be silently ignored."""
    from ah_plugin.config import settings
    from ah_plugin.inductor.patches import builtin_autoheuristic

    requested = settings.builtin_only_requested({settings.ENV_USE: "mm,mixed_mm", settings.ENV_COLLECT: "pad_mm"})
    assert requested == {"mixed_mm", "pad_mm"}
    dropped = tuple(int(part) for part in TORCH.split(".")) >= (2, 15)
    assert builtin_autoheuristic.builtin_lacks(requested) == (["mixed_mm"] if dropped else [])
