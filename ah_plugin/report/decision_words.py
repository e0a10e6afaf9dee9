"""An autotuning in the words a user knows, for the one line the plugin says per decision: the operation
and its shape (``mm 4096x1024 @ 1024x512, bfloat16``), the device by name, what was kept.

Plain data in (``AutotuneRequest``'s tensor descriptions and metadata), text out; standard library only.
"""

from __future__ import annotations

LISTED = 3  # kept choices named one by one up to this many


def _dims(desc: dict) -> list[int]:
    return [int(d) for d in desc.get("size", ())]


def _dtype(desc: dict) -> str:
    return str(desc.get("dtype", "")).replace("torch.", "")


def gemm(request) -> str:
    """The request's operation with its product written out (``mm 32x64 @ 64x96, float32``; ``bmm 8 x
    128x64 @ 64x32``); an operation of other inputs lists their sizes. A request without tensor
    descriptions is said from its ``m``, ``k``, ``n`` features."""
    op_name, tensors, feats = request.op_name, request.tensors, request.features
    if not tensors and all(key in feats for key in ("m", "k", "n")):
        return f"{op_name} {feats['m']}x{feats['k']} @ {feats['k']}x{feats['n']}"
    shapes = [_dims(t) for t in tensors]
    dtype = _dtype(tensors[0]) if tensors else ""
    product = None
    if op_name in ("mm", "bmm") and len(shapes) == 2:
        product = shapes[0], shapes[1]
    elif op_name in ("addmm", "baddbmm") and len(shapes) == 3:
        product = shapes[1], shapes[2]
    elif op_name == "packed_linear" and len(shapes) >= 3 and len(shapes[0]) == 2 and len(shapes[2]) == 2:
        product = shapes[0], shapes[2][::-1]  # the input, and the weight as (out, in), transposed
    if product is not None and len(product[0]) == len(product[1]) and len(product[0]) in (2, 3):
        a, b = product
        batch = f"{a[0]} x " if len(a) == 3 else ""
        text = f"{op_name} {batch}{a[-2]}x{a[-1]} @ {b[-2]}x{b[-1]}"
    else:
        text = f"{op_name} " + ", ".join("x".join(map(str, s)) or "scalar" for s in shapes)
    return f"{text}, {dtype}" if dtype else text


def device(metadata: dict) -> str:
    """The device by name: the GPU's (``NVIDIA H100 80GB HBM3``), or ``the CPU``."""
    name = str(metadata.get("device_name") or "")
    if not name or name.lower() == "cpu" or tuple(metadata.get("device_capa") or (0, 0)) == (0, 0):
        return "the CPU"
    return name


def kept(keep: list[str], candidates: list[str]) -> str:
    """``kept X alone of 2 choices`` or ``kept 2 of 41 choices (X, Y)``."""
    total = len(candidates)
    if len(keep) == 1:
        return f"kept {keep[0]} alone of {total} choice{'s' if total != 1 else ''}"
    named = ", ".join(keep[:LISTED]) + (", ..." if len(keep) > LISTED else "")
    return f"kept {len(keep)} of {total} choices ({named})"
