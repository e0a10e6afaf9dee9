"""Every candidate of every autotuning in a block of code: Inductor's own time, its replay time, the pick.

The map of where autotuning pays (``torchgen_ah.evaluation.studies.autotune_map``) needs, per autotuning, what
default max-autotune chose and what the fastest candidate would have been on the clock a compiled model runs
on (CUDA-graph replay). Inductor's choice is left untouched: each candidate's benchmark returns Inductor's own
figure, and its callable is then timed again by replay, outside Inductor's measurement. The seconds spent on
that second timing are counted, so a study can take them off the compile's wall time.

Two torch attributes are replaced inside the ``with`` block only, and put back on exit:
``AlgorithmSelectorCache.benchmark_choice`` (to know which candidate is being timed) and the process
benchmarker's ``benchmark_gpu`` (to see the callable Inductor times). A feedback saver, registered once
(Inductor has no call to remove one), reads the timings; it does nothing outside a block. Checked on torch
2.11 and 2.13.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field

import torch
from torch._inductor import select_algorithm
from torch._inductor.runtime import benchmarking

from ..replay_timing import ReplayTimingError
from .graph_trees import replay_time_ms
from .patches.benchmarker import on_current_stream
from .requests import is_extern_caller

# the keys of a Triton template's log info that tell its configs apart (flex attention's and GEMMs')
_CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2", "GROUP_M",
                "num_stages", "num_warps", "tile_shape", "USE_TMA", "kpack", "matrix_instr_nonkdim", "waves_per_eu")


@dataclass
class Candidate:
    """One candidate of one autotuning."""

    label: str  # "aten:<kernel>" for an extern kernel, else the template's name and config
    inductor_ms: float  # Inductor's own figure (inf: failed)
    replay_ms: float | None = None  # CUDA-graph replay of the same callable; None where it could not be taken
    config: dict = field(default_factory=dict)  # a template's tunables (BLOCK_M=..., num_warps=...); {} for aten

    def matches(self, config: dict) -> bool:
        """Whether this candidate runs ``config`` (every key of it, with the same value)."""
        return bool(config) and all(self.config.get(key) == value for key, value in config.items())


@dataclass
class Autotuning:
    """One autotuning: its name (``mm``, ``flex_attention``, ...), candidates and Inductor's pick."""

    name: str
    candidates: list[Candidate]

    @property
    def picked(self) -> Candidate | None:
        """The candidate Inductor's timings rank first (what its selection keeps, fusion aside)."""
        finite = [c for c in self.candidates if c.inductor_ms < float("inf")]
        return min(finite, key=lambda c: c.inductor_ms) if finite else None

    @property
    def fastest(self) -> Candidate | None:
        """The candidate fastest under replay (None when no replay was taken)."""
        timed = [c for c in self.candidates if c.replay_ms is not None]
        return min(timed, key=lambda c: c.replay_ms) if timed else None

    def by_label(self, label: str) -> Candidate | None:
        return next((c for c in self.candidates if c.label == label), None)

    def by_config(self, config: dict) -> Candidate | None:
        """The candidate that runs ``config`` (``flex_default_config``'s, say), or None."""
        return next((c for c in self.candidates if c.matches(config)), None)

    def aten(self) -> Candidate | None:
        """The first extern (aten) candidate, or None."""
        return next((c for c in self.candidates if c.label.startswith("aten:")), None)


@dataclass
class ProbeRecord:
    """What a ``probe_autotunings`` block saw."""

    autotunings: list[Autotuning] = field(default_factory=list)
    replay_seconds: float = 0.0  # wall time spent on the replay timings (not Inductor's)
    replay_failures: int = 0


def candidate_config(caller) -> dict:
    """A template candidate's tunables from its log info ({} for an extern kernel)."""
    if is_extern_caller(caller):
        return {}
    try:
        info = dict(caller.info_dict())
    except Exception:  # best effort, as in Inductor
        return {}
    config = {key: info[key] for key in _CONFIG_KEYS if key in info and info[key] not in (-1, "-1", None)}
    if "BLOCK_M" in config or "BLOCK_M1" in config:
        config.pop("tile_shape", None)  # flex attention's: its BLOCK_M and BLOCK_N say it
    return config


def candidate_label(caller) -> str:
    """A candidate in words: ``aten:<kernel>`` for an extern kernel, else ``<template> k=v ...``."""
    if is_extern_caller(caller):
        return f"aten:{getattr(getattr(caller, 'choice', None), 'name', getattr(caller, 'name', 'extern'))}"
    config = candidate_config(caller)
    template = str(getattr(caller, "name", "") or type(caller).__name__).split("_")[0]
    if not config:
        return str(getattr(caller, "description", "") or template)
    return " ".join([template, *(f"{key}={value}" for key, value in config.items())])


def flex_default_config(kernel: str, head_dim: int, dtype) -> dict:
    """The one config max-autotune off runs for a flex attention kernel (``kernel``: ``flex_attention``,
    ``flex_attention_backward`` or ``flex_decoding``) on the current GPU, as ``candidate_config`` names it."""
    from torch._inductor import config as inductor_config
    from torch._inductor.choices import InductorChoices

    choices = InductorChoices()
    with inductor_config.patch(max_autotune=False):
        if kernel == "flex_attention":
            conf = choices.get_flex_attention_fwd_configs(head_dim, dtype, "cuda")[-1]
            return {"BLOCK_M": conf.block_m, "BLOCK_N": conf.block_n, "num_stages": conf.num_stages,
                    "num_warps": conf.num_warps}
        if kernel == "flex_attention_backward":
            conf = choices.get_flex_attention_bwd_configs(head_dim, dtype, "cuda")[-1]
            return {"BLOCK_M1": conf.block_m1, "BLOCK_N1": conf.block_n1, "BLOCK_M2": conf.block_m2,
                    "BLOCK_N2": conf.block_n2, "num_stages": conf.num_stages, "num_warps": conf.num_warps}
        if kernel == "flex_decoding":
            conf = choices.get_flex_decode_configs(head_dim, dtype, "cuda")[-1]
            return {"BLOCK_N": conf.block_n, "num_stages": conf.num_stages, "num_warps": conf.num_warps}
    raise ValueError(f"unknown flex attention kernel {kernel!r}")


_block: dict = {"record": None}
_current_choice: contextvars.ContextVar = contextvars.ContextVar("ah_candidate_probe_choice", default=None)
_replays: dict = {}  # id(choice) -> replay ms, for the autotuning under way
_saver_added = [False]


def _feedback(timings, name, *args, **kwargs) -> None:
    record = _block["record"]
    if record is None:
        return
    candidates = []
    for caller, ms in timings.items():
        try:
            label = candidate_label(caller)
        except Exception:  # never break the compile
            label = repr(caller)[:60]
        try:
            config = candidate_config(caller)
        except Exception:  # never break the compile
            config = {}
        candidates.append(Candidate(label, float(ms), _replays.pop(id(caller), None), config))
    labels = [c.label for c in candidates]
    for i, candidate in enumerate(candidates):  # keep labels unique: the same config can be offered twice
        if labels.count(candidate.label) > 1:
            candidate.label = f"{candidate.label} #{labels[:i].count(candidate.label) + 1}"
    record.autotunings.append(Autotuning(str(name), candidates))


@contextlib.contextmanager
def probe_autotunings(replay: bool = True):
    """Record every autotuning inside the block (``ProbeRecord``); ``replay``: also time each candidate by
    CUDA-graph replay (GPU candidates only). Inductor's timings and choices are not changed."""
    if not _saver_added[0]:
        select_algorithm.add_feedback_saver(_feedback)
        _saver_added[0] = True
    record = ProbeRecord()
    selector = select_algorithm.AlgorithmSelectorCache
    original_choice = selector.__dict__["benchmark_choice"]
    bench = benchmarking.benchmarker
    had_own = "benchmark_gpu" in bench.__dict__
    own = bench.__dict__.get("benchmark_gpu")
    original_gpu = bench.benchmark_gpu

    def benchmark_choice(cls, choice, autotune_args):
        token = _current_choice.set(choice)
        try:
            return original_choice.__func__(cls, choice, autotune_args)
        finally:
            _current_choice.reset(token)

    def benchmark_gpu(*args, **kwargs):
        result = original_gpu(*args, **kwargs)
        choice = _current_choice.get()
        if replay and choice is not None and len(args) == 1 and torch.cuda.is_available():
            start = time.perf_counter()
            try:
                _replays[id(choice)] = replay_time_ms(on_current_stream(args[0]))
            except (ReplayTimingError, RuntimeError):
                record.replay_failures += 1
            record.replay_seconds += time.perf_counter() - start
        return result

    _block["record"] = record
    selector.benchmark_choice = classmethod(benchmark_choice)
    bench.benchmark_gpu = benchmark_gpu
    try:
        yield record
    finally:
        selector.benchmark_choice = original_choice
        if had_own:
            bench.benchmark_gpu = own
        else:
            del bench.benchmark_gpu
        _block["record"] = None
        _replays.clear()
