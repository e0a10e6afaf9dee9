"""Quality mode's fused-group decision, timed by CUDA-graph replay and won only by the aten margin.

Where a GEMM's autotuning keeps a Triton template beside aten, Inductor lowers it to a
``MultiTemplateBuffer`` and decides at fusion time (``Scheduler.speedup_by_fusion``, with
``config.benchmark_epilogue_fusion``, on by default) between two groups: the autotuning's fastest choice
(cuBLAS, or a template) followed by the neighbouring kernel compiled alone, and a template with that kernel
fused into its epilogue (or prologue). It compiles the fused kernel, times it and the neighbour alone, and
fuses when ``fused < fastest + neighbour``. Those two times are per call (``benchmark_gpu``'s events),
the timing that overstates small kernels (docs/fast_mode.md), while the GEMM's candidates are replayed:
the group comparison mixed two clocks.

While quality mode is on with replay timing, this patch makes the decision one clock: everything the
decision times itself (the neighbour alone, the fused kernel) is timed by replay through the benchmarker's
plan (``patches/benchmarker.py``), like the GEMM's candidates. The fused kernel's time, as the scheduler's
``benchmark_codegened_module`` returns it to the decision, counts ``1 + aten margin`` times: a fused template
replaces the fastest choice plus its separate kernel only when it is faster by the margin, the never-slower
rule of the GEMM's own autotuning (``ah_plugin.use.aten_margin``) applied to the group. The margin is applied on
the scheduler instance for the length of the decision only, so the time Inductor keeps in its
``.kernel_perf`` file beside the fused kernel's code is the replayed time, unscaled. Such a file from an
earlier compile in the same cache folder is read instead of timing again, by whichever method wrote it.

Only the multi-template decision is changed; the general ``benchmark_fusion`` path (off by default) is
Inductor's, and so are the choices of what is tried fused (``max_epilogue_benchmarked_choices``, 1 by
default; ``max_template_fusion_benchmarked_choices`` from 2.15) and which neighbours qualify.
``Scheduler.speedup_by_fusion(self, node1, node2)`` returns a ``FusionResult`` whose ``callable_fn``, when
set, does the fused benchmark later, on the same thread, once parallel compilation is done; the plan and
the margin cover that callable. Checked on torch 2.11, 2.13, 2.14 and 2.15.

**A neighbour that nothing fused is compared with is not timed.** While the plugin is on and no template
may be timed fused (``max_epilogue_benchmarked_choices``, or ``max_template_fusion_benchmarked_choices`` from
2.15, at 0: fast mode sets it), Inductor's decision still compiles and times the neighbour (the epilogue, or
a prologue) alone, then its loop over fused choices stops at the count before compiling any, and it declines
the fusion: on the H200, part of the 0.22-0.67 s the Llama-style decoder's scheduler spent on its two
multi-template GEMMs. That time is only ever compared with a fused template's (the fused timings of
``multi_kernel_hints``, when set, never meet it), so for a pair holding a multi-template the wrapper answers
it with an infinite time without compiling anything (``untimed["neighbours"]``,
``ah_plugin.status()["neighbours_untimed"]``); the decision Inductor returns is the same, apart. Read in the
sources of torch 2.13, 2.14 and 2.15, where a multi-template pair, epilogue or prologue, always takes the
branch that times the neighbour by that one call; on 2.11 a real compile checked an epilogue
(tests/test_fusion_timing.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import torch._inductor.config as inductor_config

from ...report.messages import warn_once
from ...report.verbose_output import verbose
from .. import contract, plans
from ..session import Timing, opened
from . import benchmarker, mode_options

counts: Counter = Counter()  # "fused" / "apart": decisions taken by a fused benchmark under the plan
untimed: Counter = Counter()  # "neighbours": not compiled and timed alone, since nothing fused was compared with them
_saved: dict = {}
_FUSED_TIMING = "benchmark_codegened_module"  # the scheduler method the decision reads the fused time from
_NEIGHBOUR_TIMING = "benchmark_fused_nodes"  # ... and the neighbour's time alone


def _multi_template(node1, node2) -> bool:
    """Whether the pair holds a template node that is still a choice between kernels (Inductor's own test)."""
    from torch._inductor import ir

    return any(n.is_template() and isinstance(n.get_template_node(), ir.MultiTemplateBuffer)
               for n in (node1, node2))


def _on_cuda(node1) -> bool:
    device = node1.get_nodes()[0].get_device()
    return device is not None and device.type == "cuda"


def _nothing_timed_fused() -> bool:
    """Whether Inductor may time no template fused with its neighbour (the count set to 0, as fast mode does)."""
    entry = mode_options.fused_benchmarks_entry()
    return entry is not None and getattr(inductor_config, entry, None) == 0


def _without_neighbour_timing(scheduler_instance, fn, *args):
    """``fn(*args)`` with the instance's timing of a kernel alone answered as infinitely slow, uncompiled.

    Inductor compares that time only with fused templates' (which may not run at a count of 0), so the
    decision comes out as it would have: apart."""

    def benchmark_fused_nodes(*_args, **_kwargs):
        untimed["neighbours"] += 1
        return float("inf"), None

    had_own = _NEIGHBOUR_TIMING in vars(scheduler_instance)
    previous = vars(scheduler_instance).get(_NEIGHBOUR_TIMING)
    setattr(scheduler_instance, _NEIGHBOUR_TIMING, benchmark_fused_nodes)
    try:
        return fn(*args)
    finally:
        if had_own:
            setattr(scheduler_instance, _NEIGHBOUR_TIMING, previous)
        else:
            delattr(scheduler_instance, _NEIGHBOUR_TIMING)


def _under(plan, fn, *args):
    with opened(Timing(plan)):
        return fn(*args)


def _with_margin(scheduler_instance, scale: float):
    """The scheduler's fused-kernel timing with its time multiplied by ``scale`` (set on the instance)."""
    unscaled = getattr(scheduler_instance, _FUSED_TIMING)

    def benchmark_codegened_module(*args, **kwargs):
        result = unscaled(*args, **kwargs)
        if isinstance(result, tuple) and result and isinstance(result[0], (int, float)):
            return (result[0] * scale, *result[1:])
        return result

    return benchmark_codegened_module


def _deferred(scheduler_instance, callable_fn, names: str, margin: float):
    """``callable_fn`` (the fused benchmark and the decision) run under the replay plan, with the fused time
    counting ``1 + margin`` times on ``scheduler_instance``; the verdict counted."""

    def decide() -> bool:
        had_own = _FUSED_TIMING in vars(scheduler_instance)
        previous = vars(scheduler_instance).get(_FUSED_TIMING)
        setattr(scheduler_instance, _FUSED_TIMING, _with_margin(scheduler_instance, 1.0 + margin))
        try:
            fused = _under(benchmarker.Plan(timing=benchmarker.METHOD_REPLAY), callable_fn)
        finally:
            if had_own:
                setattr(scheduler_instance, _FUSED_TIMING, previous)
            else:
                delattr(scheduler_instance, _FUSED_TIMING)
        counts["fused" if fused else "apart"] += 1
        verbose(f"fusion of {names}: {'fused template kept' if fused else 'kept apart'} (both groups "
                         f"timed by replay, the fused kernel winning only by the {margin:.0%} margin)")
        return fused

    return decide


def install() -> None:
    """Wrap ``Scheduler.speedup_by_fusion``. ``plans.fusion_margin()`` says at each call whether the plan
    applies: the aten margin (a fraction) in quality mode with replay timing, else None (Inductor's own)."""
    from torch._inductor import scheduler

    if "speedup_by_fusion" in _saved:
        return
    original = scheduler.Scheduler.speedup_by_fusion
    _saved["speedup_by_fusion"] = original

    def speedup_by_fusion(self, node1, node2):
        try:
            margin = plans.fusion_margin()
            applies = margin is not None and _multi_template(node1, node2) and _on_cuda(node1)
            if applies:
                benchmarker.wrap_instance()
                names = f"{node1.get_name()} and {node2.get_name()}"
        except Exception as exc:  # never break the compile: Inductor's own decision
            warn_once(("fusion_timing", type(exc).__name__),
                      f"ah_plugin: fused-group timing is off for this compile ({exc!r})")
            applies = False
        try:
            untimed = plans.acting() and _multi_template(node1, node2) and _on_cuda(node1) and _nothing_timed_fused()
        except Exception as exc:  # Inductor times the neighbour alone, as without the plugin
            warn_once(("neighbour_untimed", type(exc).__name__),
                      f"ah_plugin: fusion neighbours are timed alone as Inductor does for this compile ({exc!r})")
            untimed = False
        decide = original
        if untimed:
            contract.note("fusion_timing")

            def decide(scheduler_instance, first, second):
                return _without_neighbour_timing(scheduler_instance, original, scheduler_instance, first, second)
        if not applies:
            return decide(self, node1, node2)
        contract.note("fusion_timing")
        result = _under(benchmarker.Plan(timing=benchmarker.METHOD_REPLAY), decide, self, node1, node2)
        if getattr(result, "callable_fn", None) is None:
            return result  # decided without a fused benchmark (no template alone came within the group's time)
        return dataclasses.replace(result, callable_fn=_deferred(self, result.callable_fn, names, margin))

    speedup_by_fusion.__wrapped__ = original
    scheduler.Scheduler.speedup_by_fusion = speedup_by_fusion


def uninstall() -> None:
    if "speedup_by_fusion" in _saved:
        from torch._inductor import scheduler

        scheduler.Scheduler.speedup_by_fusion = _saved.pop("speedup_by_fusion")
