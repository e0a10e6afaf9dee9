"""Timing a GPU callable the way it runs in a compiled model under CUDA graphs.

Inductor's autotuner times each candidate call by call, with events around every launch and the L2
cache flushed in between. For small GEMMs that counts Python launch latency and a cold cache, which a
model replayed by CUDA graphs never pays, and it favours Triton templates over aten (cuBLAS), whose
launch is cheaper. Here the callable is captured ``calls`` times into one CUDA graph, the graph is
replayed, and the replay time divided by ``calls`` is the per-call time.

``calls`` is chosen so that one replay lasts about ``target_ms`` (from a short probe graph), between
``min_calls`` and ``max_calls``; the result is the median of ``replays`` timed replays. Only
``torch.cuda`` is used (no Inductor internals), so the adapter, the padding decision and the
benchmarks share this one definition of a kernel's time.
"""

from __future__ import annotations

import math
import statistics

METHOD_REPLAY = "cudagraph_replay"  # what a log's metadata says of data timed here
METHOD_PER_CALL = "per_call"  # Inductor's own event timing of each call (what unmarked logs hold)
METHODS = (METHOD_REPLAY, METHOD_PER_CALL)

DEFAULT_TARGET_MS = 1.0
DEFAULT_REPLAYS = 5
MIN_CALLS = 5
MAX_CALLS = 1000
_PROBE_CALLS = 5
_WARMUP_CALLS = 3


class ReplayTimingError(RuntimeError):
    """The callable could not be captured into a CUDA graph (a host sync, an unsupported op, ...)."""


def _capture(torch, fn, calls: int, pool=None):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        for _ in range(calls):
            fn()
    return graph


def _time_replays(torch, graph, replays: int) -> list[float]:
    """Milliseconds of each of ``replays`` replays (events around each, one sync at the end)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(replays)]
    graph.replay()  # the first replay uploads the graph
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def calls_for(probe_ms_per_call: float, target_ms: float = DEFAULT_TARGET_MS,
              min_calls: int = MIN_CALLS, max_calls: int = MAX_CALLS) -> int:
    """How many calls one replay should hold so that it lasts about ``target_ms``."""
    if not probe_ms_per_call > 0 or math.isinf(probe_ms_per_call):
        return min_calls
    return max(min_calls, min(max_calls, int(math.ceil(target_ms / probe_ms_per_call))))


def replay_time_ms(fn, *, calls: int | None = None, replays: int = DEFAULT_REPLAYS,
                   target_ms: float = DEFAULT_TARGET_MS) -> float:
    """Per-call milliseconds of ``fn`` (a no-argument callable launching GPU work on the current stream),
    timed by CUDA-graph replay. Raises ``ReplayTimingError`` when ``fn`` cannot be captured."""
    import torch  # lazy: this module is imported by code paths that must stay free of torch at import

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as graph capture requires
        for _ in range(_WARMUP_CALLS):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        if calls is None:
            probe = _capture(torch, fn, _PROBE_CALLS)
            per_call = min(_time_replays(torch, probe, 2)) / _PROBE_CALLS
            del probe
            calls = calls_for(per_call, target_ms)
        graph = _capture(torch, fn, calls)
    except Exception as exc:  # torch raises RuntimeError for an illegal capture; anything else alike
        torch.cuda.synchronize()
        raise ReplayTimingError(f"cannot capture into a CUDA graph: {type(exc).__name__}: {exc}") from exc
    times = _time_replays(torch, graph, replays)
    del graph
    return statistics.median(times) / calls
