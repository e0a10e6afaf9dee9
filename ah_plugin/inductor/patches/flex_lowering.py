"""The query, key and value of the FlexAttention call being lowered, for the flex config hooks.

Inductor asks its choices handler for a flex kernel's configs with the head dim and dtype only
(``InductorChoices.get_flex_attention_fwd_configs(head_dim, dtype, device_type)`` and its twins), while the
configs that pay depend on the sequence lengths and heads too (a decoding kernel over a 16k-token cache
wants larger key blocks than one over 2k). The lowerings of the two flex operators
(``torch._inductor.lowering.lowerings[torch.ops.higher_order.flex_attention]`` and ``..._backward``) are
wrapped here to keep the call's query, key and value, as plain descriptions, while the lowering runs;
the lowering's session (``session.FlexCall``) holds them. Nothing else changes: the wrapped lowering is called with its own arguments.
The session also holds what the results cache's key of the call needs (``call_context``): the block mask's
block sizes and a digest of the score and mask functions and the kernel options; and, once the configs are
decided, off's default config of each kernel (``note_off_config``), the aten margin's baseline.
Checked on torch 2.11, 2.13, 2.14 and 2.15.
"""

from __future__ import annotations

import hashlib

import torch
from torch._inductor import lowering as inductor_lowering

from ...use import flex_ranking
from .. import contract, session, thread_choices
from ..requests import node_description

_saved: dict = {}


def current_call() -> list[dict] | None:
    """Descriptions (size, stride, dtype) of the query, key and value of the flex call being lowered."""
    call = session.innermost(session.FlexCall)
    return call.tensors if call is not None else None


def note_off_config(op: str, config_id: str) -> None:
    """Note, for the flex call being lowered, the config max-autotune off runs for its ``op`` kernel
    (``flex_ranking.CONTEXT_OFF_CONFIGS``): the baseline the configs kept with it are timed against."""
    call = session.innermost(session.FlexCall)
    if call is not None:
        call.context.setdefault(flex_ranking.CONTEXT_OFF_CONFIGS, {})[op] = config_id


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
        thread_choices.ensure()  # the backward's flex lowering runs in autograd's thread
        try:
            call = [describe(node) for node in args[:3]]
        except Exception:  # an input without a layout: the hooks rank by head dim and dtype alone
            call = None
        try:
            context = call_context(args, kwargs)
        except Exception:  # arguments of another shape: no key, the results cache stays out of this call
            context = {}
        with session.opened(session.FlexCall(call, context)):
            return original(*args, **kwargs)

    lowering._ah_plugin_flex = True
    lowering.__wrapped__ = original
    return lowering


def call_context(args, kwargs) -> dict:
    """The key context of one flex lowering call (``AutotuneRequest.context``, read by the results cache): the block mask's
    (query, key/value) block sizes and a digest of every function graph the call carries (score, mask,
    joint) and of its kernel options. Found by kind, not position (the block mask is the tuple that ends in
    the mask graph, after the two block sizes; the kernel options the first dict), so the forward's and the
    backward's arguments, which differ between torch versions, read alike. Empty when a part is missing."""
    values = [*args, *kwargs.values()]
    block_mask = next((v for v in values if isinstance(v, tuple) and len(v) >= 3 and _graph_code(v[-1])), None)
    if block_mask is None:
        return {}
    q_block, kv_block = int(block_mask[-3]), int(block_mask[-2])
    codes = [code for code in map(_graph_code, [*values, block_mask[-1]]) if code]
    options = next((v for v in values if isinstance(v, dict)), {})
    text = "\n".join([*codes, repr(sorted((str(k), repr(v)) for k, v in options.items()))])
    return {flex_ranking.CONTEXT_SPARSE_BLOCKS: (q_block, kv_block),
            flex_ranking.CONTEXT_FUNCTIONS: hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]}


def _graph_code(value) -> str | None:
    """The Python code of an Inductor subgraph's FX graph module (a score, mask or joint function)."""
    module = getattr(value, "graph_module", None)
    code = getattr(module, "code", None)
    return code if isinstance(code, str) else None
