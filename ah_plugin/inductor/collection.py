"""What data generation needs from Inductor: a warm-up that times nothing, turn-taking on a shared GPU,
fresh autotuning in every repetition, and where candidates compile.

* ``launch_only_benchmarks``: inside, Inductor's benchmarker runs each candidate once (or not at all) and
  reports a constant, so a warm-up compile builds and loads every kernel without timing anything;
* ``real_pad_decisions``: inside such a warm-up, the pad_mm pass still benchmarks "pad or not" for real
  (its decision is cached for the logged repetitions); with replay timing the pass times through the
  plugin and needs nothing here;
* ``autotune_device_work_in_turn``: the autotuning steps that touch the GPU (example inputs, each
  candidate's output buffers) hold a lock, so a worker compiling outside its turn never runs work on a GPU
  another worker is timing on;
* ``no_shape_padding`` / ``shape_padding_on``: unaligned GEMMs logged as they are (``gen_data_mm
  --shape-padding off``), and what the journal says of it;
* ``configure_for_collection``: every repetition re-benchmarks (result caches off) and no pass merges
  the independent mms of a batch;
* ``compile_in_process`` / ``compile_pool_info``: candidates compile in the worker's own threads, not in
  Inductor's subprocess pool, and what the journal records about it;
* ``inductor_backend``: a Dynamo backend that is Inductor with a compile mode's options, for callers that
  wrap the compiled graph (a worker holding the device lock while it runs).

Checked on torch 2.11 and 2.13 (``runtime.benchmarking.benchmarker``, ``fx_passes.pad_mm.get_do_bench``,
``AlgorithmSelectorCache.benchmark_example_value`` / ``benchmark_choices``, ``select_algorithm.get_num_workers``,
``compile_fx.compile_fx``, ``list_mode_options``).
"""

from __future__ import annotations

import contextlib
import functools

import torch._inductor.config as inductor_config
from torch._inductor import list_mode_options
from torch._inductor.compile_fx import compile_fx
from torch._inductor.fx_passes import pad_mm
from torch._inductor.runtime.benchmarking import benchmarker
from torch._inductor.select_algorithm import AlgorithmSelectorCache, get_num_workers

from .compile_tools import set_options, without_compile_caches

# Autotuning steps that run work on the device before and around benchmarking: creating the example inputs
# (random fills) and, per choice, zeroing its output and workspace.
AUTOTUNE_DEVICE_WORK = ("benchmark_example_value", "benchmark_choices")


@contextlib.contextmanager
def launch_only_benchmarks(launch: bool = True):
    """Inside: the benchmarker runs each candidate once (``launch=False``: not at all) and reports 1.0."""

    def run_once(_callable, *args, **kwargs):
        if launch:
            _callable()
        return [1.0] if kwargs.get("return_mode") == "all" else 1.0

    names = [name for name in ("benchmark_gpu", "benchmark_cpu") if hasattr(benchmarker, name)]
    own = {name: vars(benchmarker).get(name) for name in names}
    for name in names:
        setattr(benchmarker, name, run_once)
    try:
        yield
    finally:
        for name in names:
            if own[name] is None:
                delattr(benchmarker, name)
            else:
                setattr(benchmarker, name, own[name])


class real_pad_decisions:
    """Inside a compile-only warm-up: the pad_mm pass still benchmarks "pad or not" for real.

    The pass caches that decision and the logged repetitions reuse it; from the warm-up's placeholder
    times it would always be "do not pad", and decided only in the first repetition it would make that
    repetition compile the padded mm's candidates. So the pass gets the real benchmarker, captured on
    entry (before ``launch_only_benchmarks`` replaces it). ``usable`` is False on a torch without the
    pass's ``get_do_bench``: the caller then switches padding off for the warm-up. Not for workers
    sharing a GPU: the pass would need their turn, once per unaligned mm."""

    def __init__(self):
        self.usable = hasattr(benchmarker, "benchmark_gpu") and callable(vars(pad_mm).get("get_do_bench"))
        self._saved = None

    def __enter__(self):
        if self.usable:
            real = benchmarker.benchmark_gpu
            self._saved = pad_mm.get_do_bench
            pad_mm.get_do_bench = lambda: functools.partial(real, warmup=5)
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            pad_mm.get_do_bench, self._saved = self._saved, None
        return False


def padding_off():
    """A ``with`` block in which the pad_mm pass pads nothing (a warm-up that cannot decide for real)."""
    return inductor_config.patch(shape_padding=False)


def no_shape_padding() -> None:
    """For the rest of this worker the pad_mm pass pads nothing, so an unaligned GEMM (128x768x2) is
    autotuned and logged as it is, not as its padded twin (``gen_data_mm --shape-padding off``)."""
    set_options(shape_padding=False)


def shape_padding_on() -> bool:
    """Whether Inductor's pad_mm pass may pad in this process (what the journal records per input)."""
    return bool(inductor_config.shape_padding)


def check_turn_taking_hooks() -> None:
    """Workers that share a device need to know where Inductor's autotuning touches it."""
    missing = [name for name in AUTOTUNE_DEVICE_WORK if name not in vars(AlgorithmSelectorCache)]
    if missing:
        raise RuntimeError(f"--workers-per-gpu > 1 needs AlgorithmSelectorCache.{', .'.join(missing)} in this "
                           "torch (where autotuning creates device tensors); run one worker per GPU")


@contextlib.contextmanager
def autotune_device_work_in_turn(lock):
    """Inside: each autotuning step of ``AUTOTUNE_DEVICE_WORK`` holds ``lock`` (whose release synchronizes
    the device). Restored on exit."""
    saved = {name: vars(AlgorithmSelectorCache)[name] for name in AUTOTUNE_DEVICE_WORK}

    def in_turn(function):
        def call(*args, **kwargs):
            with lock.held():
                return function(*args, **kwargs)
        return call

    for name, descriptor in saved.items():
        kind = type(descriptor) if isinstance(descriptor, (staticmethod, classmethod)) else None
        wrapped = in_turn(descriptor.__func__ if kind else descriptor)
        setattr(AlgorithmSelectorCache, name, kind(wrapped) if kind else wrapped)
    try:
        yield
    finally:
        for name, descriptor in saved.items():
            setattr(AlgorithmSelectorCache, name, descriptor)


def configure_for_collection() -> None:
    """Every repetition re-benchmarks (result caches off), and the fusion passes that could merge the
    independent mms of a batch (group/batch fusion) are off."""
    without_compile_caches()
    set_options(pre_grad_fusion_options={}, post_grad_fusion_options={})


def compile_in_process() -> None:
    """Candidates compile in this process's threads (``compile_threads`` 1: no subprocess pool), so the
    kernels a warm-up loads are the ones the logged repetitions run."""
    set_options(compile_threads=1)


def compile_pool_info() -> dict:
    """For the journal: ``compile_threads`` (1: no subprocess pool) and the threads precompiling candidates."""
    return {"compile_threads": getattr(inductor_config, "compile_threads", None),
            "precompile_threads": get_num_workers()}


def inductor_backend(mode: str, wrap=None):
    """A Dynamo backend: Inductor with ``mode``'s options; ``wrap(compiled)`` may wrap the compiled graph."""
    options = list_mode_options(mode, False)

    def backend(graph_module, example_inputs):
        compiled = compile_fx(graph_module, example_inputs, config_patches=options)
        return wrap(compiled) if wrap is not None else compiled

    return backend
