"""The physical floor of a step: its weights streamed from HBM once, or its FLOPs at the GPU's peak.

A decode step reads every weight once for a handful of tokens, so its floor is bytes over bandwidth; a
prefill step does hundreds of FLOPs per byte, so its floor is FLOPs over peak. Both are computed for every
step and the larger is the bound: a step's distance from it says how much any kernel choice could still
win. Defaults are the H200's (HBM3e 4.8 TB/s; about 790 TFLOP/s of dense bf16 reached in practice).
"""

from __future__ import annotations

HBM_TBPS = 4.8
PEAK_TFLOPS = 790.0


def roofline_us(weight_bytes: float, flops: float, hbm_tbps: float = HBM_TBPS,
                peak_tflops: float = PEAK_TFLOPS) -> dict:
    """{"memory_us", "compute_us", "bound_us", "bound"} of one step ("memory" or "compute")."""
    memory = weight_bytes / (hbm_tbps * 1e12) * 1e6
    compute = flops / (peak_tflops * 1e12) * 1e6
    return {"memory_us": memory, "compute_us": compute, "bound_us": max(memory, compute),
            "bound": "memory" if memory >= compute else "compute"}


def streamed_weight_bytes(torch, model) -> int:
    """Bytes of the parameters a step reads whole: all but embedding tables (a lookup reads a few rows),
    which count only when another module also uses them (an LM head tied to the embedding)."""
    embedding_only, used = {}, set()
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if isinstance(module, torch.nn.Embedding):
                embedding_only[id(param)] = param
            else:
                used.add(id(param))
    seen, total = set(), 0
    for param in model.parameters():
        if id(param) in seen or (id(param) in embedding_only and id(param) not in used):
            continue
        seen.add(id(param))
        total += param.numel() * param.element_size()
    return total


def attention_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of one attention call, queries (batch, heads, q_len, dim) against keys and values that may
    have fewer heads (grouped-query attention: each key/value head serves several query heads): the
    scores (q_len x dim by dim x k_len) and their product with the values, per query head; causal masks
    not taken off, as for the other attention formulas."""
    batch, heads, q_len, dim = query_shape[-4:]
    k_len, v_dim = key_shape[-2], value_shape[-1]
    return 2 * batch * heads * q_len * k_len * (dim + v_dim)


def _attention_ops(torch) -> dict:
    """The fused attention ops whose own formula in ``torch.utils.flop_counter`` rejects grouped-query
    shapes, mapped to ``attention_flops`` (those this torch has)."""
    aten = torch.ops.aten
    names = ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu")
    return {getattr(aten, name): attention_flops for name in names if hasattr(aten, name)}


def step_flops(torch, model, inputs) -> int:
    """FLOPs of one eager forward (``torch.utils.flop_counter``: matrix products and attention, grouped-query
    attention included)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=_attention_ops(torch)) as counter:
        model(*inputs)
    return counter.get_total_flops()
