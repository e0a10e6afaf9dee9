"""Whether a compiled GEMM computed its product: the compiled result against eager PyTorch's, on the same inputs.

The speed tables compare modes that may run different kernels (templates, decompose-K, padded operands); a
kernel that is fast and wrong must show up in the same report. The error is the largest absolute difference
over the largest absolute value of eager's result, so it reads the same at any magnitude: rounding of a
16-bit result is near 1e-3 of the largest value, and a wrong tile or stride gives differences as large as
the values themselves.
"""

from __future__ import annotations

WRONG_ABOVE = 2e-2  # a relative error over this is a wrong result, not rounding


def relative_error(compiled, eager) -> float | None:
    """max |compiled - eager| / max |eager| over the tensors of two results (tensors or sequences of them);
    None when they cannot be compared (not tensors, shapes that differ)."""
    pairs = _pairs(compiled, eager)
    if not pairs:
        return None
    worst = 0.0
    for got, want in pairs:
        if got.shape != want.shape:
            return None
        if got.numel() == 0:
            continue
        want = want.detach().double()
        scale = want.abs().max().item() or 1.0
        worst = max(worst, (got.detach().double() - want).abs().max().item() / scale)
    return worst


def _pairs(compiled, eager) -> list:
    import torch

    if isinstance(compiled, torch.Tensor) and isinstance(eager, torch.Tensor):
        return [(compiled, eager)]
    if isinstance(compiled, (list, tuple)) and isinstance(eager, (list, tuple)) and len(compiled) == len(eager):
        return [pair for got, want in zip(compiled, eager) for pair in _pairs(got, want)]
    return []


def report_lines(results: list[dict]) -> list[str]:
    """The report's account of the results lines' ``result_error``: the largest, and every (mode, shape)
    above ``WRONG_ABOVE`` (empty when no line was checked)."""
    checked = [r for r in results if r.get("result_error") is not None]
    if not checked:
        return []
    worst = max(checked, key=lambda r: r["result_error"])
    wrong = [r for r in checked if r["result_error"] > WRONG_ABOVE]
    text = (f"Results checked against eager PyTorch on the same inputs ({len(checked)} compiles): largest relative "
            f"error {worst['result_error']:.1e} ({worst['mode']}, {worst['shape']}); ")
    if not wrong:
        return ["", text + f"none above {WRONG_ABOVE:g}."]
    return ["", text + f"**{len(wrong)} wrong** (above {WRONG_ABOVE:g}): "
            + ", ".join(f"{r['mode']} {r['shape']} ({r['result_error']:.2g})" for r in wrong) + "."]
