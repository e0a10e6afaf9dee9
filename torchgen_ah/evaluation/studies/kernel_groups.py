"""GPU kernels of a step grouped by what they compute, from their names alone: GEMM, attention, norm,
pointwise, other.

A step profile names where the time goes before any optimization is tried; the profiler gives kernel
names only. Inductor names its Triton kernels by kind and by the operations fused in
(``triton_tem_`` a GEMM template, ``triton_poi_`` pointwise, ``triton_red_``/``triton_per_`` reductions,
then ``fused_<ops>``; a template compiled once by the plugin keeps its benchmark's name, e.g. ``triton_mm``);
library kernels carry their library's names (cuBLAS ``gemm``/``gemv``/``nvjet``, CUTLASS, flash and
memory-efficient attention, cuDNN). Inductor's own kernels are classified by their
kind first: a pointwise kernel named after the ``addmm`` whose bias add it took in is pointwise, not a GEMM.
A softmax counts as attention (where attention is not one fused kernel, the softmax is its middle).
Standard library only.
"""

from __future__ import annotations

GROUPS = ("gemm", "attention", "norm", "pointwise", "other")
_FUSED_KINDS = ("poi", "red", "per", "for")  # Inductor's pointwise, reduction, persistent-reduction, foreach
_ATTENTION = ("flash", "fmha", "attention", "attn", "sdpa", "softmax")
_NORM = ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "group_norm", "batch_norm", "batchnorm", "rsqrt",
         "var_mean", "bn_fw", "norm")
# library GEMM kernels (convolutions included: implicit GEMMs); split-K reduces belong to their GEMM
_GEMM = ("gemm", "gemv", "nvjet", "xmma", "cutlass", "cublas", "splitk", "wgmma", "s16816", "s1688", "matmul",
         "conv", "dgrad", "wgrad", "fprop", "grouped_mm")
_POINTWISE = ("elementwise", "vectorized", "copy", "fill", "catarray")  # gathers, memcpy and the rest: other


def classify(name: str) -> str:
    """The group of one kernel name (case ignored)."""
    low = name.lower()
    if low.startswith("triton_"):
        parts = low.split("_", 2)
        kind = parts[1] if len(parts) == 3 else ""
        if kind not in _FUSED_KINDS:  # a template: triton_tem_*, or named as its benchmark (triton_mm)
            return "gemm" if kind == "tem" or "mm" in low else "other"
        if any(word in parts[2] for word in _ATTENTION):
            return "attention"
        if any(word in parts[2] for word in _NORM):
            return "norm"
        return "pointwise" if kind in ("poi", "for") else "other"
    if any(word in low for word in _ATTENTION):
        return "attention"
    if any(word in low for word in _NORM):
        return "norm"
    if any(word in low for word in _GEMM):
        return "gemm"
    return "pointwise" if any(word in low for word in _POINTWISE) else "other"


def group_kernels(kernels: list[tuple[str, float]], steps: int = 1) -> dict:
    """{group: {"us": microseconds per step, "count": kernels per step}} over (name, microseconds) pairs
    recorded over ``steps`` steps; every group present, empty ones at zero."""
    out = {g: {"us": 0.0, "count": 0.0} for g in GROUPS}
    for name, us in kernels:
        cell = out[classify(name)]
        cell["us"] += us / steps
        cell["count"] += 1 / steps
    return out


def top_kernels(kernels: list[tuple[str, float]], steps: int = 1, top: int = 3) -> list[dict]:
    """The ``top`` kernel names by total time per step: {"name", "group", "us", "count"} (per step)."""
    totals: dict[str, list] = {}
    for name, us in kernels:
        cell = totals.setdefault(name, [0.0, 0])
        cell[0] += us
        cell[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    return [{"name": name, "group": classify(name), "us": us / steps, "count": count / steps}
            for name, (us, count) in ranked]
