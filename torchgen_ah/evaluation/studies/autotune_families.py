"""The ops users turn max-autotune on for, beyond plain mm, each on shapes taken from real models.

A *workload* is one op on one input: a function to compile, its inputs (made on demand, seeded), the name
Inductor autotunes it under, and what max-autotune off runs for it (aten, or flex attention's one default
config). ``FAMILIES`` lists them per family, in the order a study runs them (the most asked-about first):

* ``flex_attention``: FlexAttention's forward with causal, sliding-window, document, prefix-LM masks and
  score modifications (ALiBi, tanh soft-capping), at Llama-, Mistral-, Gemma- and GPT-2-like sizes;
* ``flex_attention_backward``: a training step's forward and backward through FlexAttention;
* ``flex_decoding``: one query token against a KV cache (the decoding kernel), with grouped-query heads;
* ``scaled_mm``: fp8 (e4m3) GEMMs of a Llama-3-8B-like decoder at decode and prefill, tensor-wise and
  row-wise scales;
* ``grouped_mm``: a Mixtral-like mixture of experts' expert GEMMs (8 experts, tokens routed unevenly);
* ``bmm``: attention's batched GEMMs and a decode-shaped one;
* ``convolution``: ResNet-50's 3x3 convolutions and its stem, channels-last;
* ``int_mm``: int8 GEMMs of a quantized decoder.

Torch only (no Inductor internals): the study compiles each ``Workload.fn`` itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class Workload:
    """One op on one input."""

    family: str  # a key of FAMILIES
    label: str  # the shape in words
    autotuned_as: str  # the name Inductor autotunes it under
    build: Callable[[], tuple]  # -> (fn, inputs): fn(*inputs) is what is compiled
    features: dict = field(default_factory=dict)  # what a ranking could see (sizes, mask kind, ...)
    off_kernel: str = "aten"  # what max-autotune off runs: "aten" or "flex_default" (the default config)
    training: bool = False  # fn runs a backward too (its inputs require grad)
    head_dim: int = 0  # flex attention: the head dim its default config is chosen by
    dtype: torch.dtype = torch.bfloat16


# ---- flex attention: masks and score modifications -----------------------------------------------------

def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _sliding(window: int):
    def mask(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)
    return mask


def _document(lengths: list[int], device: str):
    """Causal attention within each of several packed documents (``lengths`` sum to the sequence)."""
    ids = torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lengths)]).to(device)

    def mask(b, h, q_idx, kv_idx):
        return (ids[q_idx] == ids[kv_idx]) & (q_idx >= kv_idx)
    return mask


def _prefix_lm(prefix: int):
    def mask(b, h, q_idx, kv_idx):
        return (kv_idx < prefix) | (q_idx >= kv_idx)
    return mask


def _alibi(heads: int, device: str):
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)], device=device)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)
    return score_mod


def _softcap(cap: float):
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod


def _flex(family: str, label: str, batch: int, heads: int, kv_heads: int, seq: int, head_dim: int, *,
          mask: str = "none", window: int = 0, score: str = "none", kv_seq: int | None = None,
          device: str = "cuda", dtype=torch.bfloat16) -> Workload:
    """A FlexAttention workload: forward (``flex_attention``), forward and backward
    (``flex_attention_backward``) or one query token against ``kv_seq`` cached ones (``flex_decoding``)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    kv_seq = kv_seq or seq
    q_seq = 1 if family == "flex_decoding" else seq
    training = family == "flex_attention_backward"

    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        q = torch.randn(batch, heads, q_seq, head_dim, device=device, dtype=dtype, generator=gen)
        k = torch.randn(batch, kv_heads, kv_seq, head_dim, device=device, dtype=dtype, generator=gen)
        v = torch.randn(batch, kv_heads, kv_seq, head_dim, device=device, dtype=dtype, generator=gen)
        mask_mod = {"none": None, "causal": _causal, "sliding": _sliding(window) if window else None,
                    "document": _document(_doc_lengths(seq), device) if mask == "document" else None,
                    "prefix_lm": _prefix_lm(seq // 4)}[mask]
        if family == "flex_decoding" and mask == "sliding":  # the newest token sees the last `window` cached
            def mask_mod(b, h, q_idx, kv_idx):
                return kv_seq - 1 - kv_idx < window
        block_mask = (create_block_mask(mask_mod, None, None, q_seq, kv_seq, device=device)
                      if mask_mod is not None else None)
        score_mod = {"none": None, "alibi": _alibi(heads, device), "softcap": _softcap(30.0)}[score]
        gqa = heads != kv_heads

        def attend(q, k, v):
            return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)

        if not training:
            return attend, (q, k, v)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        grad_out = torch.randn(batch, heads, q_seq, head_dim, device=device, dtype=dtype, generator=gen)
        return attend, (q, k, v, grad_out)

    density = _density(mask, q_seq, kv_seq, window)
    features = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "q_seq": q_seq, "kv_seq": kv_seq,
                "head_dim": head_dim, "mask": mask, "score_mod": score, "density": round(density, 4),
                "dtype": str(dtype).split(".")[-1]}
    return Workload(family, label, family, build, features, "flex_default", training, head_dim, dtype)


def _doc_lengths(seq: int) -> list[int]:
    """Packed documents of uneven lengths, multiples of 128, summing to ``seq``."""
    parts = [0.4, 0.25, 0.2, 0.15]
    lengths = [max(128, int(seq * p) // 128 * 128) for p in parts[:-1]]
    return lengths + [seq - sum(lengths)]


def _density(mask: str, q_seq: int, kv_seq: int, window: int) -> float:
    """The share of (query, key) pairs a mask keeps (what a block-sparse kernel's work scales with)."""
    if mask == "none":
        return 1.0
    if mask == "causal":
        return (q_seq + 1) / (2 * q_seq) if q_seq == kv_seq else 1.0
    if mask == "sliding":
        if q_seq == 1:
            return min(window, kv_seq) / kv_seq
        kept = sum(min(i + 1, window) for i in range(q_seq))
        return kept / (q_seq * kv_seq)
    if mask == "document":
        return sum(n * (n + 1) / 2 for n in _doc_lengths(q_seq)) / (q_seq * kv_seq)
    if mask == "prefix_lm":
        prefix = q_seq // 4
        return sum(max(i + 1, prefix) for i in range(q_seq)) / (q_seq * kv_seq)
    return math.nan


# ---- GEMM families -------------------------------------------------------------------------------------

def _scaled(label: str, m: int, n: int, k: int, scaling: str, device: str = "cuda") -> Workload:
    """``x @ w.T`` in fp8 e4m3 with bf16 out: ``tensorwise`` (one scale each) or ``rowwise`` scales."""
    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(m, k, device=device, generator=gen).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=device, generator=gen).to(torch.float8_e4m3fn)
        if scaling == "tensorwise":
            sa = torch.tensor(0.5, device=device)
            sb = torch.tensor(0.25, device=device)
        else:
            sa = torch.rand(m, 1, device=device, generator=gen) + 0.5
            sb = torch.rand(1, n, device=device, generator=gen) + 0.5

        def scaled(a, b, sa, sb):
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        return scaled, (a, w.t(), sa, sb)

    return Workload("scaled_mm", label, "scaled_mm", build,
                    {"m": m, "n": n, "k": k, "scaling": scaling, "dtype": "float8_e4m3fn"})


def _grouped(label: str, tokens: int, experts: int, k: int, n: int, device: str = "cuda") -> Workload:
    """A mixture of experts' expert GEMM: ``tokens`` routed rows, split unevenly over ``experts``."""
    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(tokens, k, device=device, dtype=torch.bfloat16, generator=gen)
        w = torch.randn(experts, n, k, device=device, dtype=torch.bfloat16, generator=gen) / math.sqrt(k)
        offs = torch.tensor(_routed_offsets(tokens, experts), device=device, dtype=torch.int32)

        def grouped(x, w, offs):
            return torch._grouped_mm(x, w, offs=offs)
        return grouped, (x, w.transpose(-2, -1), offs)

    return Workload("grouped_mm", label, "grouped_mm", build,
                    {"tokens": tokens, "experts": experts, "k": k, "n": n, "dtype": "bfloat16"})


def _routed_offsets(tokens: int, experts: int) -> list[int]:
    """Cumulative row counts of an uneven routing, in blocks of 16 rows (as the kernels align them).

    The blocks go to the experts by largest remainder of an uneven weighting, so a batch with fewer than 16
    rows per expert still spreads over its heaviest experts instead of landing on one; the rows left over
    after whole blocks go to the last expert.
    """
    weights = [1.0 + 0.6 * math.sin(1.7 * i) for i in range(experts)]
    blocks = tokens // 16
    shares = [blocks * w / sum(weights) for w in weights]
    counts = [int(s) for s in shares]
    by_remainder = sorted(range(experts), key=lambda i: shares[i] - counts[i], reverse=True)
    for i in by_remainder[:blocks - sum(counts)]:
        counts[i] += 1
    counts = [16 * c for c in counts]
    counts[-1] += tokens - sum(counts)
    out, total = [], 0
    for c in counts:
        total += c
        out.append(total)
    return out


def _bmm(label: str, batch: int, m: int, k: int, n: int, device: str = "cuda") -> Workload:
    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(batch, m, k, device=device, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(batch, k, n, device=device, dtype=torch.bfloat16, generator=gen)
        return torch.bmm, (a, b)

    return Workload("bmm", label, "bmm", build, {"batch": batch, "m": m, "k": k, "n": n, "dtype": "bfloat16"})


def _conv(label: str, batch: int, c_in: int, c_out: int, size: int, kernel: int, stride: int,
          device: str = "cuda") -> Workload:
    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(batch, c_in, size, size, device=device, dtype=torch.bfloat16, generator=gen)
        w = torch.randn(c_out, c_in, kernel, kernel, device=device, dtype=torch.bfloat16, generator=gen)
        x = x.to(memory_format=torch.channels_last)
        w = w.to(memory_format=torch.channels_last) / math.sqrt(c_in * kernel * kernel)

        def conv(x, w):
            return torch.nn.functional.conv2d(x, w, stride=stride, padding=kernel // 2)
        return conv, (x, w)

    return Workload("convolution", label, "convolution", build,
                    {"batch": batch, "c_in": c_in, "c_out": c_out, "size": size, "kernel": kernel,
                     "stride": stride, "dtype": "bfloat16", "layout": "channels_last"})


def _int8(label: str, m: int, n: int, k: int, device: str = "cuda") -> Workload:
    def build():
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randint(-8, 8, (m, k), device=device, dtype=torch.int8, generator=gen)
        w = torch.randint(-8, 8, (n, k), device=device, dtype=torch.int8, generator=gen)
        return torch._int_mm, (a, w.t())

    return Workload("int_mm", label, "int_mm", build, {"m": m, "n": n, "k": k, "dtype": "int8"})


def _families() -> dict[str, list[Workload]]:
    fa, fb, fd = "flex_attention", "flex_attention_backward", "flex_decoding"
    return {
        fa: [
            _flex(fa, "causal 4x16x2048 d128", 4, 16, 16, 2048, 128, mask="causal"),
            _flex(fa, "sliding-256 8x16x1024 d64", 8, 16, 16, 1024, 64, mask="sliding", window=256),
            _flex(fa, "causal GQA 2x32/8x4096 d128 (Llama-3-8B)", 2, 32, 8, 4096, 128, mask="causal"),
            _flex(fa, "document 1x16x8192 d64", 1, 16, 16, 8192, 64, mask="document"),
            _flex(fa, "softcap causal 4x8x2048 d256 (Gemma-2)", 4, 8, 8, 2048, 256, mask="causal",
                  score="softcap"),
            _flex(fa, "ALiBi 8x12x1024 d64", 8, 12, 12, 1024, 64, score="alibi"),
            _flex(fa, "sliding-4096 GQA 1x32/8x8192 d128 (Mistral)", 1, 32, 8, 8192, 128, mask="sliding",
                  window=4096),
            _flex(fa, "prefix-LM 16x12x512 d64", 16, 12, 12, 512, 64, mask="prefix_lm"),
        ],
        fd: [
            _flex(fd, "decode GQA 8x32/8 kv4096 d128", 8, 32, 8, 4096, 128, kv_seq=4096),
            _flex(fd, "decode GQA 32x32/8 kv2048 d128", 32, 32, 8, 2048, 128, kv_seq=2048),
            _flex(fd, "decode GQA 1x32/8 kv16384 d128", 1, 32, 8, 16384, 128, kv_seq=16384),
            _flex(fd, "decode sliding-4096 4x32/8 kv16384 d128", 4, 32, 8, 16384, 128, kv_seq=16384,
                  mask="sliding", window=4096),
        ],
        fb: [
            _flex(fb, "train causal 4x16x2048 d128", 4, 16, 16, 2048, 128, mask="causal"),
            _flex(fb, "train sliding-256 8x16x1024 d64", 8, 16, 16, 1024, 64, mask="sliding", window=256),
            _flex(fb, "train document 1x16x8192 d64", 1, 16, 16, 8192, 64, mask="document"),
        ],
        "scaled_mm": [
            _scaled("tensorwise 16x6144x4096 (decode qkv)", 16, 6144, 4096, "tensorwise"),
            _scaled("tensorwise 2048x4096x4096 (prefill o)", 2048, 4096, 4096, "tensorwise"),
            _scaled("tensorwise 8192x14336x4096 (prefill up)", 8192, 14336, 4096, "tensorwise"),
            _scaled("rowwise 16x28672x4096 (decode gate_up)", 16, 28672, 4096, "rowwise"),
            _scaled("rowwise 2048x4096x14336 (prefill down)", 2048, 4096, 14336, "rowwise"),
            _scaled("rowwise 8192x6144x4096 (prefill qkv)", 8192, 6144, 4096, "rowwise"),
        ],
        "grouped_mm": [
            _grouped("1024 rows 8 experts 4096->14336 (decode batch)", 1024, 8, 4096, 14336),
            _grouped("8192 rows 8 experts 4096->14336 (prefill)", 8192, 8, 4096, 14336),
            _grouped("8192 rows 8 experts 14336->4096 (prefill down)", 8192, 8, 14336, 4096),
        ],
        "bmm": [
            _bmm("QK^T 64x1024x64x1024", 64, 1024, 64, 1024),
            _bmm("PV 64x1024x1024x64", 64, 1024, 1024, 64),
            _bmm("decode 256x1x128x2048", 256, 1, 128, 2048),
            _bmm("small 512x128x64x128", 512, 128, 64, 128),
        ],
        "convolution": [
            _conv("3x3 64ch 56x56 b32", 32, 64, 64, 56, 3, 1),
            _conv("3x3 128ch 28x28 b32", 32, 128, 128, 28, 3, 1),
            _conv("3x3 256ch 14x14 b32", 32, 256, 256, 14, 3, 1),
            _conv("7x7/2 stem 3->64 224 b32", 32, 3, 64, 224, 7, 2),
        ],
        "int_mm": [
            _int8("32x4096x4096", 32, 4096, 4096),
            _int8("2048x14336x4096", 2048, 14336, 4096),
            _int8("8192x4096x4096", 8192, 4096, 4096),
        ],
    }


FAMILY_NAMES = ("flex_attention", "flex_decoding", "flex_attention_backward", "scaled_mm", "grouped_mm", "bmm",
                "convolution", "int_mm")


def family_workloads(name: str) -> list[Workload]:
    """The workloads of one family; ValueError naming the known ones."""
    families = _families()
    if name not in families:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILY_NAMES)}")
    return families[name]
