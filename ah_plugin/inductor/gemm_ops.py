"""The GEMM ops whose lowerings the plugin wraps (``patches/lowerings.py``), and the torch versions that
lower each: what the ``lowerings`` row of the contract probes."""

from __future__ import annotations

import torch

# aten op -> the name its lowering autotunes under (``autotune_select_algorithm(name, ...)``)
LOWERED = {
    "mm": "mm",
    "addmm": "addmm",
    "bmm": "bmm",
    "baddbmm": "baddbmm",
    "_int_mm": "int_mm",
    "_scaled_mm": "scaled_mm",
    "_scaled_mm_v2": "scaled_mm",  # torch 2.13+
    "_grouped_mm": "grouped_mm",  # a mixture of experts' expert GEMMs
    "_scaled_grouped_mm": "scaled_grouped_mm",
    "_sparse_semi_structured_mm": "sparse_semi_structured_mm",
    "convolution": "convolution",
    "convolution_backward": "convolution_backward",  # its own lowering from torch 2.13 (plans.AUTOTUNED_AS)
}
SINCE = {"_scaled_mm_v2": (2, 13), "convolution_backward": (2, 13)}  # ops Inductor lowers from that torch on


def expected_ops() -> list[str]:
    """The ops of ``LOWERED`` Inductor registers a lowering for on this torch (by its version)."""
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    return [op for op in LOWERED if version >= SINCE.get(op, (0, 0))]
