"""The zoo's gpt-fast-style decoders (``studies/kv_decode.build_model``): decoding with a static KV cache,
FlexAttention prefill with a sliding-window or document mask, and fp8 projections.

Users decode with a static cache (``generate`` with a static cache, or a gpt-fast loop), so attention reads the
cache and its traffic counts; the zoo's other decoders run ``model(input_ids)`` at one token without a cache.
A step here is what a serving loop repeats: one token per sequence at a fixed position half way through the
cache (idempotent: the same token rewrites the same cache entry), or a whole prompt at prefill. Users turn
max-autotune on for FlexAttention's block sizes and fp8 scaled GEMMs, so those ops are in the zoo too. Each
builder returns ``build(torch) -> (module, make_inputs(batch))`` (``zoo_models.Entry``), made under the run's
``torch.device``; the libraries' absence (FlexAttention, fp8 support) raises there: a named, skipped model.
"""

from __future__ import annotations

FP8_MAX = 448.0  # the largest float8_e4m3fn value
# gpt-fast-like sizes at two layers (the zoo keeps every model to a few layers) and the CPU tests' tiny ones
SIZE = {"layers": 2, "dim": 2048, "heads": 32, "kv_heads": 8, "vocab": 32000}
TINY = {"layers": 1, "dim": 64, "heads": 4, "kv_heads": 2, "vocab": 128}


def _decoder(torch, size: dict, batch: int, context: int, attention: str):
    """(decoder, prefill_mask, decode_mask) on the current default device, its cache filled with random
    values (attention then reads numbers, not zeros)."""
    from torchgen_ah.evaluation.studies import kv_decode

    device = str(torch.get_default_device())
    model, prefill_mask, decode_mask = kv_decode.build_model(torch, **size, batch=batch, context=context,
                                                             attention=attention, device=device)
    with torch.no_grad():
        for block in model.blocks:
            block.k_cache.normal_()
            block.v_cache.normal_()
    return model, prefill_mask, decode_mask


def _step_module(torch, decoder, method: str, positions, mask):
    """A module whose forward is ``decoder.<method>(tokens, positions, mask)``: what the zoo compiles."""

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = decoder
            self.register_buffer("positions", positions)
            if isinstance(mask, torch.Tensor):  # SDPA's boolean mask: a buffer, a static input of CUDA graphs
                self.register_buffer("mask", mask)
            else:  # a FlexAttention BlockMask, or None (causal SDPA)
                self.mask = mask

        def forward(self, tokens):
            return getattr(self.decoder, method)(tokens, self.positions, self.mask)

    return Step()


def kv_decode(attention: str, batch: int, context: int, size: dict = SIZE, fp8: bool = False):
    """One decoding step (one token per sequence) against a static cache of ``context`` positions, at
    position ``context // 2``; ``attention`` "flex" (FlexAttention's decoding kernel, unwritten positions
    masked by a mask function) or "sdpa" (a boolean mask)."""
    def build(torch):
        from torchgen_ah.evaluation.studies.kv_decode import sdpa_decode_mask

        decoder, _, decode_mask = _decoder(torch, size, batch, context, attention)
        position = context // 2
        decoder.position.fill_(position)
        mask = decode_mask() if attention == "flex" else sdpa_decode_mask(torch, context, position,
                                                                         str(torch.get_default_device()))
        if fp8:
            fp8_projections(torch, decoder)
        step = _step_module(torch, decoder, "decode", torch.tensor([position]), mask)
        return step, lambda b: (torch.randint(0, size["vocab"], (b, 1)),)

    return build


def prefill(batch: int, tokens: int, size: dict = SIZE, flex_mask: str | None = None, window: int = 0,
            fp8: bool = False):
    """A prompt of ``tokens`` per sequence at prefill (the cache written, the last token's logits out):
    FlexAttention with a ``flex_mask`` of ``sliding`` (a window of ``window`` keys) or ``document`` (packed
    documents, causal within each), or causal SDPA (``flex_mask`` None)."""
    def build(torch):
        decoder, _, _ = _decoder(torch, size, batch, tokens, "flex" if flex_mask else "sdpa")
        block_mask = None
        if flex_mask:
            from torch.nn.attention.flex_attention import create_block_mask

            from torchgen_ah.evaluation.studies import autotune_families as families

            device = str(torch.get_default_device())
            mask_mod = families._sliding(window) if flex_mask == "sliding" else \
                families._document(families._doc_lengths(tokens), device)
            block_mask = create_block_mask(mask_mod, None, None, tokens, tokens, device=device)
        if fp8:
            fp8_projections(torch, decoder)
        step = _step_module(torch, decoder, "prefill", torch.arange(tokens), block_mask)
        return step, lambda b: (torch.randint(0, size["vocab"], (b, tokens)),)

    return build


def fp8_projections(torch, decoder) -> None:
    """Every linear layer of ``decoder``'s blocks made an fp8 one (``torch._scaled_mm``, e4m3, row-wise
    scales: per token of the input, per output row of the weight; the result in the input's dtype), as fp8
    inference quantizes a decoder. Raises where this device has no fp8 GEMM (a skipped model)."""
    nn = torch.nn
    device = torch.get_default_device()
    probe = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn)
    torch._scaled_mm(probe, probe.t(), scale_a=torch.ones(16, 1, device=device),
                     scale_b=torch.ones(1, 16, device=device), out_dtype=torch.bfloat16)

    class Fp8Linear(nn.Module):
        """Weight and scales are kept as integer views of their bits: casting the model to the run's dtype
        (``zoo_models.build``) would otherwise turn fp8 weights and float32 scales into bf16."""

        def __init__(self, linear):
            super().__init__()
            w = linear.weight.detach().float()
            scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
            self.register_buffer("weight_bits", (w / scale).to(torch.float8_e4m3fn).view(torch.uint8))
            self.register_buffer("scale_bits", scale.t().contiguous().view(torch.int32))

        def forward(self, x):
            rows = x.reshape(-1, x.shape[-1]).float()
            x_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
            out = torch._scaled_mm((rows / x_scale).to(torch.float8_e4m3fn),
                                   self.weight_bits.view(torch.float8_e4m3fn).t(), scale_a=x_scale,
                                   scale_b=self.scale_bits.view(torch.float32), out_dtype=x.dtype)
            return out.reshape(*x.shape[:-1], out.shape[-1])

    for block in decoder.blocks:
        for name, child in list(block.named_children()):
            if isinstance(child, nn.Linear):
                setattr(block, name, Fp8Linear(child))
