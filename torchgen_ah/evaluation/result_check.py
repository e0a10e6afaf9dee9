"""Whether a compiled GEMM computed its product: the compiled result against eager PyTorch's, on the same inputs.

The speed tables compare modes that may run different kernels (templates, decompose-K, padded operands); a
kernel that is fast and wrong must show up in the same report. The error is the largest absolute difference
over the largest absolute value of eager's result, so it reads the same at any magnitude: rounding of a
16-bit result is near 1e-3 of the largest value, and a wrong tile or stride gives differences as large as
the values themselves. A result that cannot match eager's (another shape or dtype, a NaN or infinity where
eager's value is finite) has an infinite error.
"""

from __future__ import annotations

import math

WRONG_ABOVE = 2e-2  # a relative error over this is a wrong result, not rounding


def relative_error(compiled, eager) -> float:
    """max |compiled - eager| / max |eager| over the tensors of two results (a tensor, or sequences of tensors
    and plain values); ``inf`` where they do not match in structure, shape or dtype, where a plain value
    differs, or where the compiled result is not finite and eager's is."""
    import torch

    if isinstance(compiled, torch.Tensor) and isinstance(eager, torch.Tensor):
        return _tensor_error(torch, compiled, eager)
    if isinstance(compiled, (list, tuple)) and isinstance(eager, (list, tuple)):
        if len(compiled) != len(eager):
            return math.inf
        return max((relative_error(got, want) for got, want in zip(compiled, eager)), default=0.0)
    if isinstance(compiled, torch.Tensor) or isinstance(eager, torch.Tensor):
        return math.inf
    return 0.0 if compiled == eager else math.inf


def checked_error(compiled, eager_call) -> float | None:
    """``relative_error`` of ``compiled`` against ``eager_call()`` run without gradients; None, said on
    stdout (a mode's log), where eager cannot run (out of memory beside the compiled result): a check that
    fails never costs a mode its measurements."""
    import torch

    try:
        with torch.no_grad():
            return relative_error(compiled, eager_call())
    except Exception as exc:
        print(f"result not checked: {type(exc).__name__}: {exc}", flush=True)
        return None


def _tensor_error(torch, got, want) -> float:
    if got.shape != want.shape or got.dtype != want.dtype:
        return math.inf
    if got.numel() == 0:
        return 0.0
    got, want = got.detach().float(), want.detach().float()  # float32 is exact enough for a 2e-2 verdict
    finite = torch.isfinite(want)
    if bool((finite & ~torch.isfinite(got)).any()):
        return math.inf
    if not bool(finite.any()):
        return 0.0
    scale = want[finite].abs().max().item() or 1.0
    return (got[finite] - want[finite]).abs().max().item() / scale


def report_lines(results: list[dict]) -> list[str]:
    """The report's account of the results lines' ``result_error``: how many were checked, the largest error,
    every (mode, shape) above ``WRONG_ABOVE``, and how many compiles could not be checked (empty when no line
    carries the field: runs from before the check)."""
    lines = [r for r in results if "result_error" in r]
    if not lines:
        return []
    checked = [r for r in lines if r["result_error"] is not None]
    unchecked = len(lines) - len(checked)
    missing = f" {unchecked} compiles could not be checked (see the modes' logs)." if unchecked else ""
    if not checked:
        return ["", f"Results against eager PyTorch:{missing}"]
    worst = max(checked, key=lambda r: r["result_error"])
    wrong = [r for r in checked if r["result_error"] > WRONG_ABOVE]
    text = (f"Results checked against eager PyTorch on the same inputs ({len(checked)} compiles): largest relative "
            f"error {worst['result_error']:.1e} ({worst['mode']}, {worst['shape']}); ")
    if not wrong:
        return ["", text + f"none above {WRONG_ABOVE:g}.{missing}"]
    return ["", text + f"**{len(wrong)} wrong** (above {WRONG_ABOVE:g}): "
            + ", ".join(f"{r['mode']} {r['shape']} ({r['result_error']:.2g})" for r in wrong) + f".{missing}"]
