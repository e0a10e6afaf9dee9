"""Wall seconds the plugin's own steps take inside a compile, beside Dynamo's and Inductor's phase timers.

Inductor's timers say a mode spent more time lowering (``GraphLowering.run``), not whether the plugin's GEMM
lowerings took it: their decisions, the max-autotune lowering that offers the candidates, the lowering done
again as off. These timers split that, per process, summed over every compile (``seconds()``;
``compile_tools.phase_seconds`` adds them to the phase table under their names):

* ``GEMM`` (``ah_plugin.gemm_lowering``): every lowering of a GEMM op the plugin wraps, whatever its plan
  (with the plugin installed and not acting, off's own GEMM lowerings);
* ``TUNED`` (``ah_plugin.gemm_lowering.tuned``): the lowerings done as the mode says (``session.TUNED``):
  the candidates offered, the policies asked, the kept templates autotuned, the lowering redone as off;
* ``RELOWERED`` (``ah_plugin.gemm_lowering.relowered``): within those, lowering again as off where the
  policies kept aten alone;
* ``DECISION`` (``ah_plugin.decision``): the plugin's pre-codegen step (naming, widening and pruning the
  candidates; the policies' decision).

A timer nested in itself (a GEMM lowering that lowers another GEMM) counts the outer call only, per thread.
Two ``perf_counter`` calls per timed step: nothing next to a lowering. The timers run only where the plugin is
installed: a compile without it (the zoo's and the compile profile's off modes) times nothing, so in the phase
table ``gemm_lowering.tuned`` less ``.relowered`` is what a plugin mode's GEMM lowerings did beyond the lowering
off does.
"""

from __future__ import annotations

import contextlib
import threading
import time

GEMM = "ah_plugin.gemm_lowering"
TUNED = "ah_plugin.gemm_lowering.tuned"
RELOWERED = "ah_plugin.gemm_lowering.relowered"
DECISION = "ah_plugin.decision"

_seconds: dict[str, float] = {}
_local = threading.local()  # the timers open in this thread


@contextlib.contextmanager
def timed(name: str):
    """Add the block's wall seconds to ``name`` (the outermost block of that name only)."""
    active = getattr(_local, "active", None)
    if active is None:
        active = _local.active = set()
    if name in active:
        yield
        return
    active.add(name)
    start = time.perf_counter()
    try:
        yield
    finally:
        _seconds[name] = _seconds.get(name, 0.0) + time.perf_counter() - start
        active.discard(name)


def seconds() -> dict[str, float]:
    """{timer: wall seconds summed so far in this process} of the timers that ran."""
    return dict(_seconds)
