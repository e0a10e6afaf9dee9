"""The log's feature columns from plain tensor descriptions.

A tensor description is a dict ``{"size": [..], "stride": [..], "dtype": "torch.bfloat16",
"contiguous": bool}`` (``contiguous`` optional: computed from size/stride as Inductor does). The hook
builds these from Inductor's nodes; everything here is pure Python.

* ``mm``: exactly the columns and values torch's built-in collector writes (m, k, n, both dtypes,
  both strides, both ``iscontig``, ``using_tf32``), so our rows and the official data mean the same.
* ``addmm``: the mm columns for (mat1, mat2) plus the bias's strides (``bias_stride_0/1``; 0 marks a
  broadcast bias); ``mm_view`` gives back the mm part, for ranking addmm with an mm artifact.
* ``int_mm`` (int8 operands, int32 result): the mm columns, so an int8 GEMM's rows read like an mm's (its
  own log and artifact: the int8 kernels' configs are not the float ones').
* ``bmm``: the mm columns for the per-batch matrices plus ``b`` (batch) and the batch strides.
* ``flex_attention``, ``flex_decoding``, ``flex_attention_backward``: batch, heads, sequence lengths, head
  dims and dtype of the query, key and value (``flex_ranking.flex_features``).
* anything else (``packed_linear`` on the CPU, ...): generic columns per input ``i``:
  ``in<i>_size_<d>``, ``in<i>_stride_<d>`` (numerical) and ``in<i>_dtype`` (categorical).

``metadata`` gives the log's metadata line for an op on a device (docs/datalayer.md). On the CPU
(and any device without CUDA) the convention is upstream's: ``device_capa`` (0, 0) and
``shared_memory`` 0; the device's name travels in ``device_name`` (not written into the log's
metadata line, which keeps upstream's keys).
"""

from __future__ import annotations

from ..replay_timing import METHOD_REPLAY
from ..use import flex_ranking

BIAS_COLUMNS = ("bias_stride_0", "bias_stride_1")


def is_contiguous(size, stride) -> bool:
    """Row-major contiguity, ignoring size-1 dims (Inductor's ``Layout.is_contiguous``)."""
    expected = 1
    for dim, st in reversed(list(zip(size, stride))):
        if dim == 1:
            continue
        if st != expected:
            return False
        expected *= dim
    return True


def _contig(desc: dict) -> bool:
    value = desc.get("contiguous")
    if value is None:
        return is_contiguous(desc["size"], desc["stride"])
    return bool(value)


def using_tf32_value(dtype: str, tf32_enabled: bool):
    """Upstream's ``using_tf32`` column: "not_float_32" unless fp32, then the TF32 switch."""
    if dtype != "torch.float32":
        return "not_float_32"
    return bool(tf32_enabled)


def _matrix_columns(out: dict, num: list, cat: list, mat1: dict, mat2: dict, tf32) -> None:
    """Shared mm/addmm/bmm columns, in upstream's order (numerical and categorical lists kept)."""
    m, k = mat1["size"][-2], mat1["size"][-1]
    n = mat2["size"][-1]
    for name, value in (("m", m), ("k", k), ("n", n)):
        out[name] = int(value)
        num.append(name)
    for tag, desc in (("mat1", mat1), ("mat2", mat2)):
        out[f"{tag}_dtype"] = desc["dtype"]
        cat.append(f"{tag}_dtype")
    for tag, desc in (("mat1", mat1), ("mat2", mat2)):
        for i, st in enumerate(desc["stride"]):
            out[f"{tag}_stride_{i}"] = int(st)
            num.append(f"{tag}_stride_{i}")
    for tag, desc in (("mat1", mat1), ("mat2", mat2)):
        out[f"{tag}_iscontig"] = _contig(desc)
        cat.append(f"{tag}_iscontig")
    if tf32 is not None:
        out["using_tf32"] = using_tf32_value(mat1["dtype"], tf32)
        cat.append("using_tf32")


def op_features(op_name: str, tensors: list[dict], tf32_enabled: bool = False):
    """Return ``(features, numerical_names, categorical_names)`` for one input of ``op_name``.

    ``features`` holds every column (values as the log writes them via ``str``); the two name lists
    are the metadata's ``numerical_features`` and ``categorical_features``.
    """
    out: dict = {}
    num: list[str] = []
    cat: list[str] = []
    if op_name in ("mm", "int_mm") and len(tensors) == 2 and _all_rank(tensors, 2):  # int_mm: an int8 mm
        _matrix_columns(out, num, cat, tensors[0], tensors[1], tf32_enabled)
    elif op_name == "addmm" and len(tensors) == 3 and _all_rank(tensors[1:], 2):
        bias, mat1, mat2 = tensors
        _matrix_columns(out, num, cat, mat1, mat2, tf32_enabled)
        stride = list(bias["stride"])[-2:]
        stride = [0] * (2 - len(stride)) + stride
        for i, st in enumerate(stride):
            out[f"bias_stride_{i}"] = int(st)
            num.append(f"bias_stride_{i}")
    elif flex_ranking.is_flex_op(op_name) and flex_ranking.is_flex_call(tensors):
        return flex_ranking.flex_features(tensors)
    elif op_name == "bmm" and len(tensors) == 2 and _all_rank(tensors, 3):
        mat1, mat2 = tensors
        out["b"] = int(mat1["size"][0])
        num.append("b")
        _matrix_columns(out, num, cat, mat1, mat2, tf32_enabled)
    else:
        for i, desc in enumerate(tensors):
            for d, value in enumerate(desc["size"]):
                out[f"in{i}_size_{d}"] = int(value)
                num.append(f"in{i}_size_{d}")
            for d, value in enumerate(desc["stride"]):
                out[f"in{i}_stride_{d}"] = int(value)
                num.append(f"in{i}_stride_{d}")
            out[f"in{i}_dtype"] = desc["dtype"]
            cat.append(f"in{i}_dtype")
    return out, num, cat


def mm_view(op_name: str, features: dict, metadata: dict):
    """``(features, metadata)`` of the mm that an ``op_name`` input contains, or None when it has none.

    Only addmm has one: on the GPU its Triton choices are the mm template with a bias epilogue (same
    configs, same ids), so an mm artifact can rank them from the (mat1, mat2) columns; the bias is a small
    extra read. The view is the addmm columns minus ``bias_stride_0/1`` (the mm columns in mm order) and
    metadata named "mm". bmm has none: its batch changes what a config costs.
    """
    numerical = list(metadata.get("numerical_features") or ())
    if op_name != "addmm" or not set(BIAS_COLUMNS) <= set(numerical):
        return None  # not addmm, or addmm with generic columns (no m, k, n)
    view_features = {name: value for name, value in features.items() if name not in BIAS_COLUMNS}
    view_metadata = dict(
        metadata,
        name="mm",
        numerical_features=[name for name in numerical if name not in BIAS_COLUMNS],
        categorical_features=list(metadata.get("categorical_features") or ()),
    )
    return view_features, view_metadata


def _all_rank(tensors, rank: int) -> bool:
    return all(len(t["size"]) == rank and len(t["stride"]) == rank for t in tensors)


def metadata(
    op_name: str,
    numerical: list[str],
    categorical: list[str],
    device_capa=(0, 0),
    shared_memory: int = 0,
    device_name: str = "cpu",
    timing: str | None = None,
) -> dict:
    """The request's metadata (log metadata keys plus ``device_name``, and ``timing``: how the
    candidates are timed, ``replay_timing.METHOD_REPLAY`` or None for Inductor's own per-call timing)."""
    meta = {
        "shared_memory": int(shared_memory),
        "device_capa": tuple(int(v) for v in device_capa),
        "name": op_name,
        "numerical_features": list(numerical),
        "categorical_features": list(categorical),
        "device_name": device_name,
    }
    if timing is not None:
        meta["timing"] = timing
    return meta


def log_metadata(request_metadata: dict) -> dict:
    """The metadata line written to the log: upstream's keys, plus ``timing`` when the choices were
    timed by CUDA-graph replay (a log without it holds Inductor's per-call timings, as upstream's do; the
    two never merge into one file)."""
    out = {k: v for k, v in request_metadata.items() if k not in ("device_name", "timing")}
    if request_metadata.get("timing") == METHOD_REPLAY:
        out["timing"] = METHOD_REPLAY
    return out


def ordered_features(features: dict, numerical: list[str], categorical: list[str]) -> dict:
    """Features in log column order (numerical first, then categorical)."""
    return {name: features[name] for name in (*numerical, *categorical)}
