"""The query, key and value of the FlexAttention call being lowered, for the flex config hooks.

Inductor asks its choices handler for a flex kernel's configs with the head dim and dtype only
(``InductorChoices.get_flex_attention_fwd_configs(head_dim, dtype, device_type)`` and its twins), while the
configs that pay depend on the sequence lengths and heads too (a decoding kernel over a 16k-token cache
wants larger key blocks than one over 2k). The lowerings of the two flex operators
(``torch._inductor.lowering.lowerings[torch.ops.higher_order.flex_attention]`` and ``..._backward``) are
wrapped here to keep the call's query, key and value, as plain descriptions, while the lowering runs;
the lowering's session (``session.FlexCall``) holds them. Nothing else changes: the wrapped lowering is called with its own arguments.
Checked on torch 2.11, 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import torch
from torch._inductor import lowering as inductor_lowering

from .. import contract, session
from ..requests import node_description

_saved: dict = {}


def current_call() -> list[dict] | None:
    """Descriptions (size, stride, dtype) of the query, key and value of the flex call being lowered."""
    call = session.innermost(session.FlexCall)
    return call.tensors if call is not None else None


def operators() -> list:
    """The flex operators whose lowerings are wrapped (those this torch has)."""
    try:
        import torch._inductor.kernel.flex.flex_attention  # noqa: F401 - registers the flex lowerings
    except ImportError:  # a torch that keeps them elsewhere: found in the table if registered already
        pass
    hop = torch.ops.higher_order
    return [getattr(hop, name) for name in ("flex_attention", "flex_attention_backward") if hasattr(hop, name)]


def install() -> None:
    """Wrap the flex lowerings (each input kept as ``requests.node_description`` describes it)."""
    if _saved:
        return
    table = inductor_lowering.lowerings
    for op in operators():
        original = table.get(op)
        if original is None or getattr(original, "_ah_plugin_flex", False):
            continue
        _saved[op] = original
        table[op] = _wrapper(original, node_description)


def uninstall() -> None:
    table = inductor_lowering.lowerings
    for op, original in _saved.items():
        if getattr(table.get(op), "_ah_plugin_flex", False):
            table[op] = original
    _saved.clear()


def _wrapper(original, describe):
    def lowering(*args, **kwargs):
        contract.note("flex_lowering")
        try:
            call = [describe(node) for node in args[:3]]
        except Exception:  # an input without a layout: the hooks rank by head dim and dtype alone
            call = None
        with session.opened(session.FlexCall(call)):
            return original(*args, **kwargs)

    lowering._ah_plugin_flex = True
    lowering.__wrapped__ = original
    return lowering
