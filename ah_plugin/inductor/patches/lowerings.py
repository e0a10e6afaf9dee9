"""Where the plugin keeps aten alone, the GEMM is lowered exactly as with max-autotune off.

Under ``max_autotune_gemm`` Inductor lowers a GEMM differently from max-autotune off even when aten
ends up the only choice: a channels-last 1x1 convolution is rewritten as an mm before any candidate
exists (``autotuning_gemm and channels_last_conv()`` in the convolution lowering), extern choices get a
fixed output layout, and an addmm binds its aten kernels to other inputs. On an H200, a channels-last
ResNet-50 stepped 1.06-1.09x max-autotune off's time that way with aten as the only choice. The
lowering functions of the GEMM ops (``torch._inductor.lowering.lowerings``, looked up by the graph at
each node) are wrapped here, and each lowering follows a plan the adapter gives per autotuning name:

* ``OFF``: lowered under max-autotune off's settings straight away (an op no policy acts on, in the
  modes that narrow ``mode="max-autotune"`` to GEMMs: convolutions without a convolution ranking, their
  backward, a mixture of experts' grouped GEMMs);
* ``TUNED``: lowered as the mode says; where the policies keep aten alone, the selector call
  (``patches/selector.py``) lowers it again as off instead of Inductor building aten's node, before any
  benchmark (the first attempt has then only realized the inputs, as off's lowering does first too);
* ``None``: left to Inductor.

Each wrapped lowering runs in its own session (``session.Lowering``): its autotuning name, its attempt,
the candidates offered so far, and how to lower it again as off. The wrapped ops and their autotuning names
are ``LOWERED``; the ops' lowering functions are keyed by every overload of the op, and all of them are
replaced. Checked on torch 2.11, 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import torch
from torch._inductor import config as inductor_config
from torch._inductor import lowering as inductor_lowering

from .. import contract, plans, plugin_timers, thread_choices
from ..gemm_ops import LOWERED
from ..session import OFF, TUNED, Lowering, opened

# max-autotune off's settings for one lowering (what ``mode=None`` leaves them at)
OFF_SETTINGS = {"max_autotune": False, "max_autotune_gemm": False}

_saved: dict = {}  # op key -> the lowering function replaced
_counts = {"off": 0, "fell_back": 0}  # lowerings done as off straight away, and after the policies kept aten


def counts() -> dict:
    return dict(_counts)


def _keys(op_name: str) -> list:
    """The lowering table's keys of ``op_name``: its packet, or the overloads Inductor registered it by."""
    packet = getattr(torch.ops.aten, op_name, None)
    if packet is None:
        return []
    return [key for key in list(inductor_lowering.lowerings)
            if key is packet or getattr(key, "overloadpacket", None) is packet]


def install() -> None:
    """Wrap the lowering of each op of ``LOWERED``; ``plans.lowering(name, args)`` gives OFF, TUNED or None
    per lowering (``args``: the lowering's inputs, for their device)."""
    if _saved:
        return
    table = inductor_lowering.lowerings
    for op_name, name in LOWERED.items():
        wrapped_for: dict = {}  # one wrapper per distinct lowering function of the op
        for key in _keys(op_name):
            original = table[key]
            if getattr(original, "_ah_plugin_lowering", False):
                continue
            if id(original) not in wrapped_for:
                wrapped_for[id(original)] = _wrapper(original, name)
            _saved[key] = original
            table[key] = wrapped_for[id(original)]


def uninstall() -> None:
    table = inductor_lowering.lowerings
    for key, original in _saved.items():
        if getattr(table.get(key), "_ah_plugin_lowering", False):
            table[key] = original
    _saved.clear()


def _as_off(original, name: str, args, kwargs):
    """The lowering as max-autotune off does it, in its own session (the plugin stays out of it)."""
    with opened(Lowering(name, OFF)):
        with inductor_config.patch(OFF_SETTINGS):
            return original(*args, **kwargs)


def _wrapper(original, name: str):
    def lowering(*args, **kwargs):
        with plugin_timers.timed(plugin_timers.GEMM):
            return _lowered(original, name, args, kwargs)

    lowering._ah_plugin_lowering = True
    lowering.__wrapped__ = original
    return lowering


def _lowered(original, name: str, args, kwargs):
    """One GEMM lowering as its plan says (``install``)."""
    contract.note("lowerings")
    try:
        decided = plans.lowering(name, args)
    except Exception:  # the plan reads the settings: never fail a lowering over them
        decided = None
    if decided == OFF:
        _counts["off"] += 1
        return _as_off(original, name, args, kwargs)
    if decided != TUNED:
        return original(*args, **kwargs)

    def relower():
        _counts["fell_back"] += 1
        with plugin_timers.timed(plugin_timers.RELOWERED):
            return _as_off(original, name, args, kwargs)

    thread_choices.ensure()  # a lazily compiled backward lowers in autograd's thread
    with plugin_timers.timed(plugin_timers.TUNED), opened(Lowering(name, TUNED, relower=relower)):
        return original(*args, **kwargs)
