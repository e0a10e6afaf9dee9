"""Inductor's CUDA-graph trees: the stream they record on, and what they hold.

A model compiled with CUDA graphs (``mode="reduce-overhead"``, ``"max-autotune"``) is recorded into trees kept
per thread and device, on a side stream of their own. Replay timing (``ah_plugin.replay_timing``) captures on
that same stream, and the benchmarks of a process's state look at what the trees hold; both reach the trees
only through this module. Checked on torch 2.11 and 2.13.
"""

from __future__ import annotations

import importlib
import sys

import torch
from torch._inductor import config as inductor_config

from .. import replay_timing

_TREES = "torch._inductor.cudagraph_trees"


def _trees_module(create: bool):
    """Inductor's CUDA-graph trees module, imported only where trees are to be made (torch imports it for a
    compile with CUDA graphs): imported in a thread other than the main one, it aborts the process at exit
    now and then (``contract.IMPORTED_BY_TORCH_ONLY``). None where it is not imported: there are no trees."""
    module = sys.modules.get(_TREES)
    if module is None and create:
        module = importlib.import_module(_TREES)
    return module


def capture_stream(create: bool | None = None):
    """The side stream of this thread's CUDA-graph trees for the current GPU; None where there are none (or
    this torch keeps them elsewhere). ``create``: make the trees where there are none; None makes them where
    the compile under way uses CUDA graphs (``triton.cudagraphs``), as the compiled model's first call would.

    Replay timing captures here: on an H200, GPU work on a side stream after a model's CUDA graph was recorded
    slows that graph by about 5% for the rest of the process (the decoder at decode, replayed alone: 0.433
    against 0.455 ms; the trees' own stream too), and a fast-mode process whose captures ran on a stream of
    their own before the decoder's graph was recorded stepped 1.059x off's, against 0.984x with them on the
    trees' stream (``benchmarks/process_state.py``; RESULTS.md ``process_state_llama_decode``,
    ``e2e_decode_replay_stream``). The trees are remade, with a new stream, after ``torch.compiler.reset()``
    or once no compiled function holds them: ask at each timing."""
    if create is None:
        create = bool(inductor_config.triton.cudagraphs)
    try:
        cudagraph_trees = _trees_module(create)
        if cudagraph_trees is None:
            return None
        manager = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=create)
    except Exception:  # not this torch's layout
        return None
    return None if manager is None else manager.stream


def replay_time_ms(fn, **kwargs) -> float:
    """``replay_timing.replay_time_ms`` capturing on the trees' stream where there is one (``capture_stream``):
    the timing the adapter's benchmarker and padding decision use, and the tools' through ``compile_tools``."""
    return replay_timing.replay_time_ms(fn, stream=capture_stream(), **kwargs)


def _tree_manager():
    cudagraph_trees = _trees_module(create=False)
    if cudagraph_trees is None:
        return None
    return cudagraph_trees.get_container(torch.cuda.current_device()).tree_manager


def function_count() -> int | None:
    """Functions recorded in the current GPU's CUDA-graph trees (None where the trees are not reachable)."""
    try:
        manager = _tree_manager()
        return None if manager is None else len(manager.ids_to_funcs)
    except AttributeError:
        return None


def first_graph():
    """The CUDA graph of the first function recorded in the current GPU's CUDA-graph trees, or None."""
    try:
        manager = _tree_manager()
        if manager is None:
            return None
        nodes = next(iter(manager.roots.values()), [])
        return getattr(nodes[0], "graph", None) if nodes else None
    except (AttributeError, StopIteration):
        return None
