"""Inductor settings and observations for the tools around the plugin (demo, evaluation, benchmarks,
offline tuning), so that none of them reaches into ``torch._inductor`` or Dynamo's internals itself.

* ``set_options(**values)``: set Inductor config entries, each only where this torch has it, in every thread;
* ``options(**values)``: the same for a ``with`` block, in the calling thread only (Inductor's ``patch``);
* ``option_values(*names)``: their current values (dotted names too: ``trace.enabled``);
* ``freeze_constant_weights()``: the CPU path's switch (``freezing``): a constant weight under
  ``torch.no_grad()`` lowers as ``packed_linear``, the GEMM Inductor autotunes on the CPU;
* ``without_compile_caches()``: every compile autotunes afresh (FX-graph, autotune and AOT caches off);
* ``observe_autotunings(records)``: what each autotuning offered and benchmarked, through Inductor's own
  callbacks (registered after the plugin's, so the list is the pruned one), ids in the plugin's scheme;
* ``mode_options(mode)``: the config patches of a ``torch.compile`` mode;
* ``builtin_mm_ranking(...)``: what torch's shipped H100 AutoHeuristic artifact ranks for an input;
* ``dynamo_graph_count()``, ``inductor_graph_count()``: graphs captured and lowered so far in the process
  (Dynamo's counters): whether a call compiled;
* ``phase_seconds()``: wall seconds per compile phase so far in the process (Dynamo's and Inductor's timers, the
  plugin's own);
* ``allow_recompiles(count)``: Dynamo recompiles one function at least ``count`` times before it gives up;
* ``forget_dynamic_shapes()``: Dynamo forgets which sizes it saw change, as in a fresh process;
* ``cache_folder()``: the folder Inductor caches compiled code in now; ``forget_compiled_code()``: Inductor's
  in-process caches of compiled code and of their folders emptied, as its own fresh-cache context does (the
  next compile goes to the caches on disk, or compiles);
* ``replay_time_ms(fn)``: replay timing capturing on the CUDA-graph trees' stream (``graph_trees``).
* ``vec_isa_trusted()``: the CPU's vector ISA probed once, for processes started with fresh caches.

Checked on torch 2.11 and 2.13.
"""

from __future__ import annotations

import contextlib
import importlib

import torch
import torch._dynamo.config as dynamo_config
import torch._dynamo.utils as dynamo_utils
import torch._functorch.config as functorch_config
import torch._inductor as inductor_package
import torch._inductor.config as inductor_config
from torch._inductor import select_algorithm
from torch._inductor.autoheuristic.autoheuristic_utils import AHContext, AHMetadata, mm_operations

from . import every_thread, plugin_timers
from .graph_trees import replay_time_ms  # noqa: F401 - the tools' replay timing
from .requests import caller_ids

# Inductor counts each graph it lowers under one of these (hit, miss or bypass of its FX-graph cache)
_INDUCTOR_COMPILES = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")


def set_options(**values) -> dict:
    """Set each Inductor config entry this torch has, for every thread (autograd's device thread compiles a
    training step's backward: ``every_thread``); returns the ones set (name -> value)."""
    applied = {name: value for name, value in values.items() if hasattr(inductor_config, name)}
    for name, value in applied.items():
        every_thread.assign(inductor_config, name, value)
    return applied


def option_values(*names: str) -> dict:
    """The current value of each named Inductor config entry, ``trace.enabled`` style names included (None
    where this torch lacks it)."""
    def value(name: str):
        out = inductor_config
        for part in name.split("."):
            out = getattr(out, part, None)
        return out

    return {name: value(name) for name in names}


@contextlib.contextmanager
def options(**values):
    """``set_options`` for a ``with`` block (entries this torch lacks are skipped)."""
    applied = {name: value for name, value in values.items() if hasattr(inductor_config, name)}
    with inductor_config.patch(applied):
        yield applied


def freeze_constant_weights(on: bool = True) -> None:
    """Inductor's ``freezing``: constant weights are folded, and a CPU GEMM becomes ``packed_linear``."""
    set_options(freezing=on)


def without_compile_caches() -> None:
    """Every compile in this process autotunes afresh: FX-graph, autotune and AOT-autograd caches off.

    ``force_disable_caches`` stays off: it gives every compile a fresh cache folder, so repeated compiles
    would also recompile every kernel."""
    set_options(fx_graph_cache=False, fx_graph_remote_cache=False, autotune_local_cache=False,
                autotune_remote_cache=False, bundled_autotune_remote_cache=False, force_disable_caches=False)
    for name in ("enable_autograd_cache", "enable_remote_autograd_cache"):
        if hasattr(functorch_config, name):
            every_thread.assign(functorch_config, name, False)


def mode_options(mode: str, dynamic: bool = False) -> dict:
    """The Inductor options ``torch.compile(mode=mode)`` applies now: looked up as ``torch.compile`` looks it
    up at each call, so fast and quality modes' narrowing (``patches/mode_options.py``) is included."""
    return inductor_package.list_mode_options(mode, dynamic)


def dynamo_graph_count() -> int:
    """Graphs Dynamo has captured in this process (its ``unique_graphs`` counter)."""
    return dynamo_utils.counters["stats"]["unique_graphs"]


def phase_seconds() -> dict[str, float]:
    """{phase: wall seconds summed} of Dynamo's and Inductor's phase timers so far in this process, with the
    plugin's own (``plugin_timers``, named ``ah_plugin.*``; nested phases overlap; Dynamo's and Inductor's are
    missing on a torch without them)."""
    metrics = getattr(dynamo_utils, "compilation_time_metrics", None) or {}
    return {**{name: float(sum(times)) for name, times in metrics.items()}, **plugin_timers.seconds()}


def inductor_graph_count() -> int:
    """Graphs Inductor has lowered in this process (FX-graph cache hits, misses and bypasses)."""
    return sum(dynamo_utils.counters["inductor"][name] for name in _INDUCTOR_COMPILES)


def allow_recompiles(count: int) -> None:
    """Let Dynamo compile one function at least ``count`` times (its recompile limit, ``cache_size_limit``
    on torches that name it so) before it runs the function eagerly."""
    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    setattr(dynamo_config, name, max(getattr(dynamo_config, name), int(count)))


def forget_dynamic_shapes() -> None:
    """Dynamo forgets the sizes it saw change (automatic dynamic shapes): a second ``torch.compile`` of a
    function in this process then compiles the graphs a fresh process would (a static first shape, then
    the dynamic graph), not the dynamic graph at once. Compiled code is kept."""
    pgo = importlib.import_module("torch._dynamo.pgo")
    pgo.reset_code_state()


def cache_folder() -> str:
    """The folder Inductor caches compiled code in (``TORCHINDUCTOR_CACHE_DIR``, read at every use)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return cache_dir()


def forget_compiled_code() -> bool:
    """Empty Inductor's in-process caches registered for its fresh-cache context (compiled C++ and Python
    modules, generated template code, the local cache's folder, the selector's precompile results); the
    autotuning callbacks stay. False where this torch has no such registry (nothing emptied)."""
    from torch._inductor import utils as inductor_utils

    clear = getattr(inductor_utils, "clear_caches", None)
    if not callable(clear):
        return False
    clear()
    return True


def observe_autotunings(records: list) -> None:
    """Append one record per autotuning: ``{"offered": ids left to benchmark, "names", "timed": ids timed,
    "op"}``. Observation never changes the compile."""

    def offered(choices):
        try:
            records.append({"offered": caller_ids(choices),
                            "names": [getattr(c, "name", str(c)) for c in choices], "timed": []})
        except Exception as exc:  # observing must never break a compile
            records.append({"offered": [], "names": [], "timed": [], "error": repr(exc)})
        return choices

    def timed(timings, name, input_nodes, choices, *args, **kwargs):
        ids = caller_ids(list(timings))
        for record in reversed(records):
            if not record["timed"] and set(ids) <= set(record["offered"]):
                record["timed"] = ids
                record["op"] = name
                break
        else:
            records.append({"offered": ids, "names": [], "timed": ids, "op": name})

    select_algorithm.add_preprocessing_fn(offered)
    select_algorithm.add_feedback_saver(timed)


def on_benchmarked(callback) -> None:
    """``callback(op_name, number of candidates timed)`` after each autotuning (Inductor's feedback saver;
    it is also called on in-process autotune-cache hits)."""
    select_algorithm.add_feedback_saver(lambda timings, name, *args, **kwargs: callback(name, len(timings)))


def on_timings(callback) -> None:
    """``callback(op_name, {choice id: ms})`` after each autotuning, with the times Inductor's autotuner took
    its pick from (also called on in-process autotune-cache hits)."""

    def saver(timings, name, *args, **kwargs):
        try:
            callback(name, dict(zip(caller_ids(list(timings)), (float(t) for t in timings.values()))))
        except Exception as exc:  # observing must never break a compile
            print(f"on_timings observer failed: {exc!r}")

    select_algorithm.add_feedback_saver(saver)


def _builtin_context(features: dict, op_name: str) -> AHContext:
    """An ``AHContext`` with the features torch's mm AutoHeuristic adds, in its order and with its value types
    (dtypes as torch dtypes, contiguity and TF32 as booleans), plus its derived operations. ``features`` holds
    the log's values (strings from a log file are converted)."""
    context = AHContext()
    for name in ("m", "k", "n"):
        context.add_feature(name, int(features[name]))
    for name in ("mat1_dtype", "mat2_dtype"):
        value = features[name]
        if isinstance(value, str):
            value = getattr(torch, value.split(".")[-1])
        context.add_feature(name, value, is_categorical=True)
    for mat in ("mat1", "mat2"):
        for i in range(2):
            context.add_feature(f"{mat}_stride_{i}", int(features[f"{mat}_stride_{i}"]))
    for name in ("mat1_iscontig", "mat2_iscontig"):
        context.add_feature(name, str(features[name]) == "True", is_categorical=True)
    if op_name == "mm" and "using_tf32" in features:
        tf32 = str(features["using_tf32"])
        context.add_feature("using_tf32", tf32 if tf32 == "not_float_32" else tf32 == "True", is_categorical=True)
    context.apply_operations(mm_operations())
    return context


def builtin_mm_ranking(features: dict, metadata: dict, candidates: list[str] | None, heuristic,
                       check_precondition: bool = True) -> list[str] | None:
    """Upstream ids ``heuristic`` (an instance of torch's shipped learned heuristic, e.g. its
    ``MMRankingH100``) ranks for one input, best first, restricted to ``candidates`` (None: all it ranks);
    None when it makes no decision (precondition false, features missing)."""
    op_name = metadata.get("name", "mm")
    capa = metadata.get("device_capa")
    ah_metadata = AHMetadata(shared_memory=metadata.get("shared_memory"),
                             device_capa=tuple(capa) if capa is not None else None,
                             choices=list(candidates or []), name=op_name)
    try:
        context = _builtin_context(features, op_name)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if check_precondition and not heuristic.check_precondition(ah_metadata, context):
        return None
    ranked = heuristic.get_decisions_ranked(context)
    if ranked is None:
        return None
    return ranked if candidates is None else [c for c in ranked if c in ah_metadata.choices]


def shipped_heuristic(name: str):
    """An instance of one of torch's shipped AutoHeuristic artifacts (``MMRankingH100``, ``MMRankingA100``)."""
    module = importlib.import_module(f"torch._inductor.autoheuristic.artifacts._{name}")
    return getattr(module, name)()


def count_config_tuning(counts: dict) -> None:
    """Count Triton's own config benchmarking (pointwise/reduction autotuning and coordinate descent) into
    ``counts["config_benchmarks"]`` / ``counts["coordinate_descent"]``: what a compile spends besides GEMM
    autotuning. A measurement aid for benchmarks; it wraps ``CachingAutotuner`` methods for the process."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner  # needs Triton: only when counting

    def counting(method, counter):
        def wrapper(self, *args, **kwargs):
            counts[counter] = counts.get(counter, 0) + 1
            return method(self, *args, **kwargs)
        return wrapper

    for attr, counter in (("benchmark_all_configs", "config_benchmarks"),
                          ("coordinate_descent_tuning", "coordinate_descent")):
        if hasattr(CachingAutotuner, attr):
            setattr(CachingAutotuner, attr, counting(getattr(CachingAutotuner, attr), counter))


VEC_ISA_OK = "TORCHINDUCTOR_VEC_ISA_OK"  # Inductor's switch: trust the CPU's flags, compile no probe


def vec_isa_trusted() -> bool:
    """Whether processes may be started with ``VEC_ISA_OK=1``: Inductor's CPU path compiles one probe
    program per vector ISA in every fresh cache (seconds of g++ on a small CPU); this probes them here
    (once per cache) and answers True when every ISA the CPU's flags name passed, so those processes pick
    the same ISA without the probes. Every kernel is still compiled."""
    from torch._inductor import cpu_vec_isa

    probed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list() if isa]
    with inductor_config.patch({"cpp.vec_isa_ok": True}):
        trusted = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list.__wrapped__()]  # the flags alone
    return probed == trusted
