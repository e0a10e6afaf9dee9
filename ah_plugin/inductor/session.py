"""One GEMM decision in progress, as one object each seam reads: the session.

Inductor calls the plugin at several seams for one autotuning (the wrapped lowering, the choices handler
before code generation, the selector call, the candidates' benchmarks, the feedback saver) and passes them
nothing of one another. What they share lives in one of these objects, on one context variable:

* ``Lowering``: a wrapped GEMM lowering (``patches/lowerings.py``): its autotuning name, how it is lowered
  (``TUNED``, or ``OFF`` as max-autotune off), the candidates offered so far, and how to lower it again as off;
* ``Autotuning``: one autotuning, opened and closed by the selector call (``patches/selector.py``): its name,
  inputs, layout and input generators, the request the policies saw, its benchmark plan;
* ``Timing``: a benchmark plan in force (a candidate being benchmarked, quality mode's fused-group decision);
* ``Padding``: one decision of the pad_mm pass, with the times the pass measured;
* ``FlexCall``: a FlexAttention call being lowered (``patches/flex_lowering.py``): its query, key and value
  described, for the flex config hooks (``flex_choices``), and the key context of its autotuning.

Each is opened with ``opened`` where its seam starts and closed when the seam returns; an inner one sees the
outer ones (a convolution's rewritten mm inside the convolution's lowering). A candidate benchmarked after
its selector call returned (Inductor's deferred multi-template benchmarks) finds its autotuning through
``of_choices``: the one module-level map, from candidates to their autotuning, weakly held.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from dataclasses import dataclass, field
from typing import Callable

OFF = "off"
TUNED = "tuned"


@dataclass(eq=False)
class Lowering:
    """A wrapped GEMM lowering: its autotuning name, the attempt, the ids offered before code generation."""

    name: str
    attempt: str  # TUNED, or OFF: lowered as max-autotune off lowers it
    relower: Callable | None = None  # TUNED: lowers the same GEMM again as off (returns its node)
    offered: list = field(default_factory=list)


@dataclass(eq=False)
class Autotuning:
    """One autotuning (one selector call): what the preprocessing, benchmarks and feedback need."""

    name: str
    input_nodes: list
    layout: object
    input_gen_fns: dict | None = None
    lowering: Lowering | None = None  # the wrapped lowering this autotuning is the TUNED attempt of
    plan: object | None = None  # the benchmark plan (``patches.benchmarker.Plan``) once set


@dataclass(eq=False)
class Timing:
    """A benchmark plan in force: the benchmarker times by it while this is open."""

    plan: object


@dataclass(eq=False)
class Padding:
    """One decision of the pad_mm pass: the (unpadded, padded) times its benchmark measured."""

    times: list = field(default_factory=list)


@dataclass(eq=False)
class FlexCall:
    """A FlexAttention call being lowered: its query, key and value as plain descriptions (None: unknown),
    and what its autotuning's key needs beyond them (``AutotuneRequest.context``: block sizes, functions)."""

    tensors: list | None
    context: dict = field(default_factory=dict)


_open: contextvars.ContextVar = contextvars.ContextVar("ah_plugin_session", default=())
_by_choice: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def opened(session):
    """``session`` open (innermost) for the block."""
    token = _open.set((*_open.get(), session))
    try:
        yield session
    finally:
        _open.reset(token)


def innermost(kind: type):
    """The innermost open session of ``kind``, or None."""
    for session in reversed(_open.get()):
        if isinstance(session, kind):
            return session
    return None


def lowered_as_off() -> bool:
    """Whether the innermost wrapped lowering is done as max-autotune off does it (the plugin stays out)."""
    lowering = innermost(Lowering)
    return lowering is not None and lowering.attempt == OFF


def bind(choices, autotuning: Autotuning) -> None:
    """Remember ``autotuning`` for ``choices`` (their benchmarks and feedback may come after its call)."""
    for choice in choices:
        try:
            _by_choice[choice] = autotuning
        except TypeError:  # not weakly referable: found only while its call is open
            pass


def of_choices(choices) -> Autotuning | None:
    """The autotuning ``choices`` were planned in (``bind``), or None."""
    for choice in choices:
        try:
            found = _by_choice.get(choice)
        except TypeError:
            found = None
        if found is not None:
            return found
    return None
