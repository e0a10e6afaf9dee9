"""How the candidates of a handled autotuning are timed: by CUDA-graph replay, and within limits.

Every candidate's ``ChoiceCaller.benchmark`` ends in Inductor's process-wide benchmarker
(``runtime.benchmarking.benchmarker``): ``benchmark_gpu(callable, ...)`` for GPU work,
``benchmark_cpu(callable, ...)`` on the CPU. Torch 2.11 has no switch to time autotuning by CUDA-graph
replay (``Benchmarker.benchmark_gpu_with_cuda_graph`` exists from 2.13, with one call per graph and the
per-call event timing around each replay), so the plugin wraps both methods on that instance. The
wrappers are inert unless a *plan* is in force (a ``session.Timing`` is open); ``with_plan`` wraps each
candidate's ``benchmark`` (a write the contract's ``benchmarker`` row names) so that its autotuning's plan
is in force exactly while that candidate is benchmarked, also when Inductor benchmarks it after the
selector call returned (deferred multi-template benchmarks), so other autotunings, Triton's own
benchmarks and the plugin-off path are untouched. A plan holds:

* ``timing``: ``replay_timing.METHOD_REPLAY`` to time GPU candidates with ``replay_time_ms`` (several
  calls captured in one graph, replay time divided by the count); a candidate that cannot be captured
  falls back to Inductor's timing and the plan notes it (``methods`` then holds both: the collector
  does not log such an input, whose times would mix two methods);
* ``limits``: ``{"duration_ms", "iterations"}`` caps from the results cache's TunableOp settings,
  mapped onto the benchmarker's keywords (``_LIMIT_MAPS``), or onto the replay's length.

Inductor's own switch (``config.autotune_cudagraph_benchmarking``, torch 2.14 and newer) is not used:
Inductor honours it only under ``max_autotune``, which fast and quality modes narrow to
``max_autotune_gemm``, and torch 2.15's benchmark requests re-apply the values recorded when each
candidate was made, so switching it on around a candidate's benchmark timed nothing by replay (every
autotuning would then be labelled "mixed" and left out of collection). The plugin's replay is also the
method its rankings were trained on (many calls per graph, warm L2), where Inductor's captures fewer calls
and flushes L2 between replays. With that switch set by the user and a mode that keeps ``max_autotune``,
Inductor times Triton candidates itself; the contract check says so (``contract.py``).

Checked on torch 2.11, 2.13, 2.14 and 2.15 (``InductorBenchmarker.benchmark_gpu(_callable, ...,
benchmark_iters, max_benchmark_duration, return_mode)``, reached from ``Benchmarker.benchmark`` on 2.15
through its per-device registry, which calls the instance's method; ``Benchmarker.benchmark_cpu(_callable,
warmup, rep)``).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field

import torch
from torch._inductor.runtime import benchmarking

from ...report.messages import warn_once
from ...report.verbose_output import verbose
from .. import contract
from ..session import Timing, innermost, opened
from ...replay_timing import DEFAULT_REPLAYS, DEFAULT_TARGET_MS, METHOD_PER_CALL, METHOD_REPLAY, \
    ReplayTimingError
from ..graph_trees import replay_time_ms  # captures on the CUDA-graph trees' stream


@dataclass
class Plan:
    """What holds while one autotuning's candidates are benchmarked."""

    timing: str | None = None  # METHOD_REPLAY, or None for Inductor's own timing
    limits: dict | None = None  # {"duration_ms": int, "iterations": int}
    methods: set = field(default_factory=set)  # the methods that actually timed a candidate

    def method(self) -> str | None:
        """The one method every timed candidate used; "mixed" when they differ; None when none ran."""
        if not self.methods:
            return None
        return next(iter(self.methods)) if len(self.methods) == 1 else "mixed"


# How a limit maps onto a benchmarker method's keyword arguments, tried in order: the first entry whose
# keywords the method accepts wins; each keyword is lowered to min(its value, the limit).
#   InductorBenchmarker.benchmark_gpu (torch's default): timed iterations and the duration (ms) it fits them in;
#   TorchProfilerBenchmarker.benchmark_gpu: ``rep`` counts iterations there;
#   TritonBenchmarker.benchmark_gpu: keywords go on to triton's do_bench, whose ``rep`` is milliseconds;
#   Benchmarker.benchmark_cpu: ``rep`` is the milliseconds of timed runs (no iteration count exists).
_LIMIT_MAPS = {
    "benchmark_gpu": (
        {"benchmark_iters": "iterations", "max_benchmark_duration": "duration_ms"},
        {"rep": "iterations", "max_benchmark_duration": "duration_ms"},
        {"rep@do_bench": "duration_ms"},
    ),
    "benchmark_cpu": ({"rep": "duration_ms"},),
}


class _Wrapped:
    benchmarker = None  # the instance wrapped
    originals: dict = {}  # method name -> the bound method replaced
    limit_plans: dict = {}  # method name -> {keyword: (limit name, default value)} or None
    noted: set = set()  # methods found replaced by someone else (said once, at verbose)


def with_plan(choices, plan: Plan):
    """Put ``plan`` in force while each of ``choices`` is benchmarked (the same list back). A plan with
    limits (the results cache tuning a miss) also keys each candidate in Inductor's autotune cache by them
    (``limits_key``): Inductor then answers such an autotuning only with timings taken under the same
    limits, never with those an earlier run took otherwise (a collection run's, default max-autotune's)."""
    wrap_instance()
    for choice in choices:
        original = getattr(choice.benchmark, "_ah_plugin_unplanned", choice.benchmark)

        def benchmark(*args, _original=original, **kwargs):
            with opened(Timing(plan)):
                return _original(*args, **kwargs)

        benchmark._ah_plugin_unplanned = original
        choice.benchmark = benchmark
        if plan.limits is not None:
            unkeyed = getattr(choice.hash_key, "_ah_plugin_unkeyed", choice.hash_key)

            def hash_key(_unkeyed=unkeyed, _suffix=limits_key(plan.limits)):
                return f"{_unkeyed()}-{_suffix}"

            hash_key._ah_plugin_unkeyed = unkeyed
            choice.hash_key = hash_key
    return choices


def limits_key(limits: dict) -> str:
    """The part of a candidate's key in Inductor's autotune cache that names the limits it was timed under."""
    return "ah_tunable_limits:" + ",".join(f"{name}={limits[name]}" for name in sorted(limits))


def install() -> None:
    """Nothing until a plan needs it: the wrappers go on the instance at each plan (``wrap_instance``)."""


def wrap_instance() -> None:
    """Put the wrappers on Inductor's benchmarker instance (on each plan; inert while none is in force).

    Checked on every plan, not once: a temporary override of a method on the instance (collection's
    compile-only warm-up replaces ``benchmark_gpu`` with a launch-only stub and restores what was there on
    exit) must neither be wrapped (its stub would then be timed by replay) nor leave the method unwrapped
    after it is gone. A method whose instance slot holds a foreign callable is left to it until a later plan.
    """
    bench = getattr(benchmarking, "benchmarker", None)
    if bench is None:
        return
    if _Wrapped.benchmarker is not bench:
        uninstall()
        _Wrapped.benchmarker, _Wrapped.originals, _Wrapped.limit_plans = bench, {}, {}
    for name in _LIMIT_MAPS:
        slot = bench.__dict__.get(name)
        if slot is not None:
            if not getattr(slot, "_ah_plugin_planned", False) and name not in _Wrapped.noted:
                _Wrapped.noted.add(name)
                verbose(f"benchmarker.{name} is replaced on the instance by {slot!r}; the plugin's "
                                 "timing plan waits until it is gone (a collection warm-up's stub is)")
            continue  # ours already, or a temporary override that owns the method for now
        unbound = getattr(type(bench), name, None)
        if unbound is None:
            continue
        original = unbound.__get__(bench, type(bench))
        _Wrapped.originals[name] = original
        bench.__dict__[name] = _planned_method(name, original)


def uninstall() -> None:
    bench = _Wrapped.benchmarker
    if bench is not None:
        for name in _Wrapped.originals:
            if getattr(bench.__dict__.get(name), "_ah_plugin_planned", False):  # never someone else's override
                bench.__dict__.pop(name)
    _Wrapped.benchmarker, _Wrapped.originals, _Wrapped.limit_plans = None, {}, {}


def _limit_plan(name: str, original):
    """{keyword: (limit name, default)} for this method's signature; None (noted) when no map fits."""
    try:
        params = inspect.signature(original).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        for mapping in _LIMIT_MAPS[name]:
            plan = {}
            for keyword, limit in mapping.items():
                if keyword.endswith("@do_bench"):  # forwarded through **kwargs to triton's do_bench
                    keyword = keyword.split("@")[0]
                    do_bench = getattr(_Wrapped.benchmarker, "triton_do_bench", None) if takes_any else None
                    target = inspect.signature(do_bench).parameters if do_bench is not None else {}
                else:
                    target = params
                if keyword not in target or target[keyword].default is inspect.Parameter.empty:
                    break
                plan[keyword] = (limit, target[keyword].default)
            else:
                return plan
    except (TypeError, ValueError) as exc:
        verbose(f"benchmark limits: cannot read the signature of {name} ({exc!r})")
    verbose(f"benchmark limits: {type(_Wrapped.benchmarker).__name__}.{name} takes none of the "
                     f"known keywords; its benchmarks are not limited")
    return None


def _limited_kwargs(name: str, original, limits: dict, kwargs: dict) -> dict:
    if name not in _Wrapped.limit_plans:
        _Wrapped.limit_plans[name] = _limit_plan(name, original)
    plan = _Wrapped.limit_plans[name]
    if plan is None:
        return kwargs
    kwargs = dict(kwargs)
    for keyword, (limit, default) in plan.items():
        if limit in limits:
            current = kwargs.get(keyword, default)
            kwargs[keyword] = limits[limit] if current is None else min(current, limits[limit])
    return kwargs


def on_current_stream(callable_):
    """``callable_``, launching on the stream that is current when it is called.

    A Triton candidate's run function (``TritonBenchmarkRequest.make_run_fn``) is a ``functools.partial``
    with the raw CUDA stream of its creation bound as ``stream=``: called during a graph capture it would
    launch outside the capturing stream, so nothing would be captured. The stream is read at call time
    instead. Other callables (aten's, which use the current stream) are returned as they are."""
    if not (isinstance(callable_, functools.partial) and "stream" in callable_.keywords):
        return callable_
    func, args, keywords = callable_.func, callable_.args, dict(callable_.keywords)

    def launch():
        keywords["stream"] = torch.cuda.current_stream().cuda_stream
        return func(*args, **keywords)

    return launch


def _replay(plan: Plan, callable_, kwargs: dict):
    """The replay-timed result in the shape ``benchmark_gpu`` returns (a list for ``return_mode="all"``)."""
    target = DEFAULT_TARGET_MS
    limits = plan.limits or {}
    if "duration_ms" in limits:
        target = min(target, limits["duration_ms"] / DEFAULT_REPLAYS)
    ms = replay_time_ms(on_current_stream(callable_), target_ms=target)
    return [ms] if kwargs.get("return_mode") == "all" else ms


def _inside_inductor_replay() -> bool:
    """Whether Inductor's own CUDA-graph benchmarking (torch 2.14 and newer, when the user switched it on
    in a mode that keeps ``max_autotune``) is timing its graph's replay through ``benchmark_gpu`` now."""
    inside = getattr(_Wrapped.benchmarker, "_in_cudagraph_benchmark", None)
    return bool(inside) if not callable(inside) else bool(inside())


def _planned_method(name: str, original):
    def planned(*args, **kwargs):
        timing = innermost(Timing)
        if timing is None:
            return original(*args, **kwargs)
        plan = timing.plan
        contract.note("benchmarker")
        if name == "benchmark_gpu" and _inside_inductor_replay():
            plan.methods.add(METHOD_REPLAY)  # Inductor's own capture calls this to time its graph's replay
            return original(*args, **kwargs)
        if name == "benchmark_gpu" and plan.timing == METHOD_REPLAY and len(args) == 1:
            try:
                result = _replay(plan, args[0], kwargs)
                plan.methods.add(METHOD_REPLAY)
                return result
            except ReplayTimingError as exc:
                warn_once(("replay", str(exc)[:80]),
                          f"ah_plugin: a candidate could not be timed by CUDA-graph replay ({exc}); "
                          "it is timed per call, and its input is not logged")
        if plan.limits and len(args) <= 1:
            kwargs = _limited_kwargs(name, original, plan.limits, kwargs)
        plan.methods.add(METHOD_PER_CALL)
        return original(*args, **kwargs)

    planned.__wrapped__ = original
    planned._ah_plugin_planned = True
    return planned
