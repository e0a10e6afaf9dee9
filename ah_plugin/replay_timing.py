"""Timing a GPU callable the way it runs in a compiled model under CUDA graphs.

Inductor's autotuner times each candidate call by call, with events around every launch and the L2
cache flushed in between. For small GEMMs that counts Python launch latency and a cold cache, which a
model replayed by CUDA graphs never pays, and it favours Triton templates over aten (cuBLAS), whose
launch is cheaper. Here the callable is captured ``calls`` times into one CUDA graph, the graph is
replayed, and the replay time divided by ``calls`` is the per-call time.

``calls`` is chosen so that one replay lasts about ``target_ms`` (from a short probe graph), between
``min_calls`` and ``max_calls``; the result is the median of ``replays`` timed replays. Only
``torch.cuda`` is used, so the adapter, the padding decision and the benchmarks share this one definition of
a kernel's time; they name the stream the captures run on (the side stream of Inductor's CUDA-graph trees,
which the adapter finds: ``ah_plugin.inductor.graph_trees``).

A callable that launches on a stream of its own choosing instead of the current one is not captured (its
work runs outside the graph, and the graph replays in next to no time): a replay under a microsecond per
call, of calls several times slower eagerly, is refused as ``ReplayTimingError`` rather than reported.
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
# No GEMM kernel runs in under a microsecond: a replay that fast, of calls that take several times longer
# eagerly, replayed a graph that holds none of the work
_EMPTY_GRAPH_MS = 0.001
_EMPTY_GRAPH_FACTOR = 4.0


class ReplayTimingError(RuntimeError):
    """The callable could not be captured into a CUDA graph (a host sync, an unsupported op, ...)."""


def _own_stream(torch):
    """A stream of this module's own for the current GPU, made once (graph capture cannot use the default
    stream): where the caller names none."""
    device = torch.cuda.current_device()
    if device not in _streams:
        _streams[device] = torch.cuda.Stream()
    return _streams[device]


_streams: dict = {}


def _capture(torch, fn, calls: int, stream):
    """``calls`` calls of ``fn`` captured into one graph. ``capture_begin``/``capture_end`` directly: the
    ``torch.cuda.graph`` context also runs ``gc.collect()`` and empties the allocator's cache on entry,
    which would cost more than the timing itself when every candidate of an autotuning is captured."""
    graph = torch.cuda.CUDAGraph()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            for _ in range(calls):
                fn()
        finally:
            graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
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
                   target_ms: float = DEFAULT_TARGET_MS, stream=None) -> float:
    """Per-call milliseconds of ``fn`` (a no-argument callable launching GPU work on the current stream),
    timed by CUDA-graph replay. Raises ``ReplayTimingError`` when ``fn`` cannot be captured.

    ``stream``: the stream the warm-up and the captures run on; None: one of this module's own. The adapter
    and the tools pass the side stream of Inductor's CUDA-graph trees where there is one
    (``ah_plugin.inductor.graph_trees``, which says why)."""
    import torch  # lazy: this module is imported by code paths that must stay free of torch at import

    side = stream if stream is not None else _own_stream(torch)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on the capture stream (lazy workspaces are made for it)
        for _ in range(_WARMUP_CALLS):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    try:
        if calls is None:
            probe = _capture(torch, fn, _PROBE_CALLS, side)
            per_call = min(_time_replays(torch, probe, 2)) / _PROBE_CALLS
            del probe
            calls = calls_for(per_call, target_ms)
        graph = _capture(torch, fn, calls, side)
    except Exception as exc:  # torch raises RuntimeError for an illegal capture; anything else alike
        torch.cuda.synchronize()
        raise ReplayTimingError(f"cannot capture into a CUDA graph: {type(exc).__name__}: {exc}") from exc
    times = _time_replays(torch, graph, replays)
    del graph
    per_call = statistics.median(times) / calls
    eager = _eager_ms(torch, fn) if per_call < _EMPTY_GRAPH_MS else 0.0
    if eager > _EMPTY_GRAPH_FACTOR * per_call:
        raise ReplayTimingError(f"the graph replays in {per_call:.4g} ms per call against {eager:.4g} ms eagerly: "
                                "the callable's work was not captured (it launches on another stream)")
    return per_call


def _eager_ms(torch, fn, calls: int = 3) -> float:
    """Milliseconds per call of ``fn`` launched eagerly (a check that the graph holds the work)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls
