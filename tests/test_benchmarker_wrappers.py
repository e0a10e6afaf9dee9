"""The plugin's wrappers on Inductor's benchmarker survive collection's compile-only warm-up.

The warm-up replaces the benchmarker's methods with a launch-only stub and puts back what was there on
exit. When the plugin's first benchmark plan came inside a warm-up, the wrappers used to wrap the stub and
then vanish with it, so every later candidate of the run was timed per call while the collector was asked
for CUDA-graph replay (the log said per call, silently). Real Inductor benchmarker, no GPU needed.
"""

from torch._inductor.runtime.benchmarking import benchmarker

from ah_plugin.inductor.collection import launch_only_benchmarks
from ah_plugin.inductor.patches import benchmarker as hooks


def _planned(name: str) -> bool:
    return getattr(vars(benchmarker).get(name), "_ah_plugin_planned", False)


def test_first_plan_inside_a_warm_up_leaves_the_wrappers_in_place_afterwards():
    hooks.uninstall()
    try:
        with launch_only_benchmarks():
            hooks.wrap_instance()  # the first plan of the run, during the warm-up
            assert benchmarker.benchmark_gpu(lambda: None) == 1.0, "the warm-up's stub must stay in charge"
            assert not _planned("benchmark_gpu")
        hooks.wrap_instance()  # the next plan, in a logged repetition
        assert _planned("benchmark_gpu") and _planned("benchmark_cpu")
        # the wrapper calls the class's method, never the stub that was in place before
        assert vars(benchmarker)["benchmark_gpu"].__wrapped__.__func__ is type(benchmarker).benchmark_gpu
    finally:
        hooks.uninstall()
    assert "benchmark_gpu" not in vars(benchmarker)


def test_wrappers_installed_before_a_warm_up_come_back_after_it():
    hooks.uninstall()
    try:
        hooks.wrap_instance()
        wrapper = vars(benchmarker)["benchmark_gpu"]
        with launch_only_benchmarks():
            assert benchmarker.benchmark_gpu(lambda: None) == 1.0
        assert vars(benchmarker)["benchmark_gpu"] is wrapper
        hooks.wrap_instance()
        assert vars(benchmarker)["benchmark_gpu"] is wrapper, "an installed wrapper is not wrapped again"
    finally:
        hooks.uninstall()
