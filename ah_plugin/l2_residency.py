"""Where replay timing of one GEMM has not held in a model: memory-bound GEMMs whose operands fit in L2.

CUDA-graph replay (``replay_timing``) calls one GEMM again and again on the same inputs, so operands smaller
than the GPU's L2 cache stay there and a memory-bound GEMM is timed at L2 rather than HBM bandwidth; in a
model's step each weight is read once, from HBM. On an H200 (torch 2.11), replay with the weight cycled over
copies larger than twice L2 took 17-30% longer than replay on one weight for the decoder's 64-row GEMMs
(``benchmarks/l2_state.py``): a different regime from the one the plugin timed. And the templates that
replay had timed 6-15% faster than cuBLAS there made the decoder's step slower, not faster (medians: 0.485 ms
over 8 processes against 0.456 ms over 7 with max-autotune off), for 1.4x off's compile time. Fast mode
therefore keeps aten alone on such GEMMs instead of compiling a template to time against it; quality mode
and the top-k modes still time templates there.

A GEMM is memory-bound here when its arithmetic intensity (flops per byte of A, B and C) is below
``RIDGE_FLOP_PER_BYTE``, about an H100/H200's bf16 tensor-core peak over its HBM bandwidth.
"""

from __future__ import annotations

import functools

RIDGE_FLOP_PER_BYTE = 200.0
_DTYPE_BYTES = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2, "torch.float64": 8,
                "torch.float8_e4m3fn": 1, "torch.float8_e5m2": 1, "torch.int8": 1}


def gemm_bytes_and_intensity(features: dict) -> tuple[int, float] | None:
    """(bytes of A, B and C, flops per byte) of an mm/bmm input's features; None when a size is missing."""
    try:
        m, k, n = (int(features[name]) for name in ("m", "k", "n"))
        batch = int(features.get("b", 1) or 1)
    except (KeyError, TypeError, ValueError):
        return None
    if min(m, k, n, batch) <= 0:
        return None
    size = _DTYPE_BYTES.get(str(features.get("mat1_dtype")), 2)
    total = batch * (m * k + k * n + m * n) * size
    return total, 2.0 * batch * m * k * n / total


def replay_misjudges(features: dict, l2_bytes: int | None) -> bool:
    """Whether replay timing would see this GEMM's operands in L2 while being memory-bound (see above);
    False when the L2 size or a size is unknown."""
    if not l2_bytes:
        return False
    sized = gemm_bytes_and_intensity(features)
    if sized is None:
        return False
    total, intensity = sized
    return total <= l2_bytes and intensity < RIDGE_FLOP_PER_BYTE


@functools.lru_cache(maxsize=None)
def _cuda_l2_bytes(device_name: str) -> int | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device()
        if torch.cuda.get_device_name(index) != device_name:
            return None
        return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0)) or None
    except Exception:  # a query that fails only switches the rule off
        return None


def l2_bytes_for(metadata: dict) -> int | None:
    """The L2 size of the GPU a request's metadata names: its ``l2_bytes`` when given, else the current
    CUDA device's when its name matches; None on a CPU or when it cannot be told."""
    if metadata.get("l2_bytes"):
        return int(metadata["l2_bytes"])
    name = metadata.get("device_name")
    if not name or tuple(metadata.get("device_capa") or (0, 0)) == (0, 0):
        return None
    return _cuda_l2_bytes(str(name))
