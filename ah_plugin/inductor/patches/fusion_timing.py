"""Quality mode's fused-group decision, timed by CUDA-graph replay and won only by the aten margin.

Where a GEMM's autotuning keeps a Triton template beside aten, Inductor lowers it to a
``MultiTemplateBuffer`` and decides at fusion time (``Scheduler.speedup_by_fusion``, with
``config.benchmark_epilogue_fusion``, on by default) between two groups: the autotuning's fastest choice
(cuBLAS, or a template) followed by the neighbouring kernel compiled alone, and a template with that kernel
fused into its epilogue (or prologue). It compiles the fused kernel, times it and the neighbour alone, and
fuses when ``fused < fastest + neighbour``. Those two times are per call (``benchmark_gpu``'s events),
the timing that overstates small kernels (docs/fast_mode.md), while the GEMM's candidates are replayed:
the group comparison mixed two clocks.

While quality mode is on with replay timing, this patch makes the whole decision one clock: the neighbour
alone and the fused kernel are timed by replay (the benchmarker's plan, ``patches/benchmarker.py``), like
the GEMM's candidates, and the fused kernel's time counts ``1 + aten margin`` times. A fused template then
replaces the fastest choice plus its separate kernel only when it is faster by the margin: the never-slower
rule of the GEMM's own autotuning (``ah_plugin.aten_margin``), applied to the group. Only the
multi-template decision is changed; the general ``benchmark_fusion`` path (off by default) is Inductor's.

The decision itself is Inductor's: which templates are tried fused (``max_epilogue_benchmarked_choices``,
1 by default; renamed ``max_template_fusion_benchmarked_choices`` in 2.15), which neighbours qualify.
Inductor keeps a fused kernel's time in a ``.kernel_perf`` file beside its code in the cache folder, so a
cache folder shared with runs that timed per call can hand back such a time.

A template kept fused is told to the policies (``on_fused_choice``): the results cache records it for its
GEMM, so a hit run lowers that template alone and Inductor fuses the same neighbour into it, the kernel the
recording run chose, with nothing benchmarked. (A recording run that kept a template apart from its
neighbour has no such record: its hit run fuses them, as Inductor does with a lone template.)

``Scheduler.speedup_by_fusion(self, node1, node2)`` returns a ``FusionResult`` whose ``callable_fn``, when
set, does the fused benchmark later (after parallel compilation); the plan covers the call and that
callable. Checked on torch 2.11, 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from ... import registry
from .. import contract
from . import benchmarker

counts: Counter = Counter()  # "fused" / "apart": multi-template fusion decisions taken under the plan (those
# Inductor takes without a fused benchmark, when no template alone comes within the group's time, included)
_saved: dict = {}


def _multi_template(node1, node2) -> bool:
    """Whether the pair holds a template node that is still a choice between kernels (Inductor's own test)."""
    from torch._inductor import ir

    return any(n.is_template() and isinstance(n.get_template_node(), ir.MultiTemplateBuffer)
               for n in (node1, node2))


def _under(plan, fn, *args):
    token = benchmarker._active.set(plan)
    try:
        return fn(*args)
    finally:
        benchmarker._active.reset(token)


def _template_buffer(node1, node2):
    from torch._inductor import ir

    for node in (node1, node2):
        if node.is_template() and isinstance(node.get_template_node(), ir.MultiTemplateBuffer):
            return node.get_template_node()
    return None


def chosen_template(buffer):
    """(the choice a decided ``MultiTemplateBuffer`` now renders, its time alone); (None, None) when none
    matches. A choice's ``get_make_kernel_render()`` is the very render Inductor finalizes the buffer with."""
    render = getattr(buffer, "make_kernel_render", None)
    for choice in getattr(buffer, "choices", ()):
        get_render = getattr(choice, "get_make_kernel_render", None)
        if get_render is not None and render is not None and get_render() is render:
            return choice, buffer.choice_timings().get(choice)
    return None, None


def _deferred(plan, callable_fn, nodes, on_fused):
    """``callable_fn`` (the fused benchmark and decision) run under ``plan``, its verdict counted and, when a
    template was fused, told to ``on_fused(choice, time alone)``."""

    def decide() -> bool:
        fused = _under(plan, callable_fn)
        counts["fused" if fused else "apart"] += 1
        names = " and ".join(n.get_name() for n in nodes)
        registry.verbose(f"fusion of {names}: {'fused template kept' if fused else 'kept apart'} "
                         f"(timed by replay, fused kernel won only by the {plan.scale - 1:.0%} margin)")
        if fused:
            try:
                choice, alone = chosen_template(_template_buffer(*nodes))
                if choice is not None:
                    on_fused(choice, float(alone) if alone is not None else float("nan"))
            except Exception as exc:  # the decision stands; only its record is lost
                registry.warn_once(("fused_choice", type(exc).__name__),
                                   f"ah_plugin: a fused template could not be reported ({exc!r})")
        return fused

    return decide


def install(margin_of, on_fused) -> None:
    """Wrap ``Scheduler.speedup_by_fusion``. ``margin_of()`` says at each call whether the plan applies:
    the aten margin (a fraction) in quality mode with replay timing, else None (Inductor's own timing).
    ``on_fused(choice, time_ms)`` hears each template kept fused (the ChoiceCaller, its time alone)."""
    from torch._inductor import scheduler

    if "speedup_by_fusion" in _saved:
        return
    original = scheduler.Scheduler.speedup_by_fusion
    _saved["speedup_by_fusion"] = original

    def speedup_by_fusion(self, node1, node2):
        try:
            margin = margin_of()
            if margin is None or not _multi_template(node1, node2):
                return original(self, node1, node2)
            device = node1.get_nodes()[0].get_device()
            if device is None or device.type != "cuda":
                return original(self, node1, node2)
            benchmarker.install()
        except Exception as exc:  # never break the compile: Inductor's own decision
            registry.warn_once(("fusion_timing", type(exc).__name__),
                               f"ah_plugin: fused-group timing is off for this compile ({exc!r})")
            return original(self, node1, node2)
        contract.note("fusion_timing")
        result = _under(benchmarker.Plan(timing=benchmarker.METHOD_REPLAY), original, self, node1, node2)
        if getattr(result, "callable_fn", None) is None:  # decided without a fused benchmark (no template close)
            counts["fused" if result.should_fuse else "apart"] += 1
            return result
        plan = benchmarker.Plan(timing=benchmarker.METHOD_REPLAY, scale=1.0 + margin)
        return dataclasses.replace(result, callable_fn=_deferred(plan, result.callable_fn, (node1, node2), on_fused))

    speedup_by_fusion.__wrapped__ = original
    scheduler.Scheduler.speedup_by_fusion = speedup_by_fusion


def uninstall() -> None:
    if "speedup_by_fusion" in _saved:
        from torch._inductor import scheduler

        scheduler.Scheduler.speedup_by_fusion = _saved.pop("speedup_by_fusion")
