"""Wall seconds the plugin's own steps take inside a compile, beside Dynamo's and Inductor's phase timers.

Inductor's timers say a mode spent more time lowering (``GraphLowering.run``), not whether the plugin's GEMM
lowerings took it: their decisions, the max-autotune lowering that offers the candidates, the lowering done
again as off. These timers split that, per process, summed over every compile (``seconds()``;
``compile_tools.phase_seconds`` adds them to the phase table under their names):

* ``GEMM`` (``ah_plugin.gemm_lowering``): every lowering of a GEMM op the plugin wraps, whatever its plan,
  the plugin acting or not (a max-autotune-off compile in a process with the plugin installed times off's
  own GEMM lowerings, the baseline);
* ``TUNED`` (``ah_plugin.gemm_lowering.tuned``): the lowerings done as the mode says (``session.TUNED``):
  the candidates offered, the policies asked, the kept templates autotuned, the lowering redone as off;
* ``RELOWERED`` (``ah_plugin.gemm_lowering.relowered``): within those, lowering again as off where the
  policies kept aten alone;
* ``DECISION`` (``ah_plugin.decision``): the plugin's pre-codegen step (naming, widening and pruning the
  candidates; the policies' decision).

A timer nested in itself (a GEMM lowering that lowers another GEMM) counts the outer call only. Two
``perf_counter`` calls per timed step: nothing next to a lowering.
"""

from __future__ import annotations

import contextlib
import time

GEMM = "ah_plugin.gemm_lowering"
TUNED = "ah_plugin.gemm_lowering.tuned"
RELOWERED = "ah_plugin.gemm_lowering.relowered"
DECISION = "ah_plugin.decision"

_seconds: dict[str, float] = {}
_active: set = set()


@contextlib.contextmanager
def timed(name: str):
    """Add the block's wall seconds to ``name`` (the outermost block of that name only)."""
    if name in _active:
        yield
        return
    _active.add(name)
    start = time.perf_counter()
    try:
        yield
    finally:
        _seconds[name] = _seconds.get(name, 0.0) + time.perf_counter() - start
        _active.discard(name)


def seconds() -> dict[str, float]:
    """{timer: wall seconds summed so far in this process} of the timers that ran."""
    return dict(_seconds)
