"""Fast mode's rule for large memory-bound GEMMs whose operands fit in L2: aten alone, no template compiled.

CUDA-graph replay (``replay_timing``) calls one GEMM again and again on the same inputs, so operands smaller
than the GPU's L2 cache stay there and a memory-bound GEMM is timed at L2 rather than HBM bandwidth; in a
model's step each weight is read once, from HBM (on an H200 the decoder's 64-row GEMMs took 17-30% longer
under replay when every call read its weight from HBM: RESULTS.md ``l2_state``). Fast mode therefore keeps
aten alone on such GEMMs instead of compiling a template to time against it. What that buys is compile
time (the decoder at decode: 0.89-1.28x max-autotune off's compile with the rule over two sets of fresh
processes, about 1.4x without); in one process the decoder's steps with and without it differed by
0.3% and 0.7%, inside the spread of identical code (RESULTS.md ``step_ab_llama_decode``).
``AH_PLUGIN_L2_RULE=off`` switches it off; quality mode and the top-k modes never apply it.

Memory-bound: arithmetic intensity (flops per byte of A, B and C) below ``RIDGE_FLOP_PER_BYTE``, an H200's
bf16 tensor-core peak over its HBM bandwidth (about 206; an H100 SXM's is about 295). The rule covers the
16-bit dtypes it was measured on; fp32 and 8-bit GEMMs have other ridges and are left to replay.

Large: operands of at least ``MIN_RULED_BYTES``. Below that, reading them from HBM instead of L2 adds about a
microsecond (an 8.4 MB weight: 1.0 us on aten, 1.0 us on a template, RESULTS.md ``l2_state``), and the
template-to-aten ratio moved by 1% cold; the template wins replay measures on such GEMMs are latency wins
of 2-3 us (13x1000x4099: 9.5 against 11.9 us; 128x768x2: 4.3 against 6.7 us, RESULTS.md
``compile_cost_fast_eval``) that residency cannot erase, so replay decides there. The rule keeps the
decoder's 23 MB projection weights, whose templates cost it 1.4x off's compile.
"""

from __future__ import annotations

import functools

RIDGE_FLOP_PER_BYTE = 200.0
MIN_RULED_BYTES = 16 * 2**20
_RULED_DTYPES = ("torch.bfloat16", "torch.float16")  # 2 bytes per element


def gemm_bytes_and_intensity(features: dict) -> tuple[int, float] | None:
    """(bytes of A, B and C, flops per byte) of a 16-bit mm/bmm input's features; None when a size is
    missing or the dtype is not one the rule covers."""
    if str(features.get("mat1_dtype", "torch.bfloat16")) not in _RULED_DTYPES:
        return None
    try:
        m, k, n = (int(features[name]) for name in ("m", "k", "n"))
        batch = int(features.get("b", 1) or 1)
    except (KeyError, TypeError, ValueError):
        return None
    if min(m, k, n, batch) <= 0:
        return None
    total = batch * (m * k + k * n + m * n) * 2
    return total, 2.0 * batch * m * k * n / total


def replay_misjudges(features: dict, l2_bytes: int | None) -> bool:
    """Whether replay timing would see this GEMM's operands in L2 while being memory-bound and large enough
    for that to matter (see above); False when the L2 size or a size is unknown."""
    if not l2_bytes:
        return False
    sized = gemm_bytes_and_intensity(features)
    if sized is None:
        return False
    total, intensity = sized
    return MIN_RULED_BYTES <= total <= l2_bytes and intensity < RIDGE_FLOP_PER_BYTE


@functools.lru_cache(maxsize=None)
def _cuda_l2_bytes(device_name: str) -> int | None:
    """The L2 size of a visible CUDA device of that name (one name, one L2 size), else None."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        for index in range(torch.cuda.device_count()):
            if torch.cuda.get_device_name(index) == device_name:
                return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0)) or None
        return None
    except Exception:  # a query that fails only switches the rule off
        return None


def l2_bytes_for(metadata: dict) -> int | None:
    """The L2 size of the GPU a request's metadata names: its ``l2_bytes`` when given, else that of a
    visible CUDA device of that name (a CPU's name matches none); None when it cannot be told."""
    if metadata.get("l2_bytes"):
        return int(metadata["l2_bytes"])
    name = metadata.get("device_name")
    return _cuda_l2_bytes(str(name)) if name else None
