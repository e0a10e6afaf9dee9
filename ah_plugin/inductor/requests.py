"""Inductor's objects turned into the plain data policies see (``AutotuneRequest``, choice ids).

Checked on torch 2.11 and 2.13: ``KernelTemplateChoice`` (``.template``, ``.params.to_kwargs()``,
``.annotations``), ``ExternKernelChoice``/``ExternKernelCaller``, ``TritonTemplate``, the CPU C++ GEMM
template's ``register_blocking``, and ``V.graph.sizevars`` hints.
"""

from __future__ import annotations

import ast
import os
import re

import torch
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.select_algorithm import (
    AlgorithmSelectorCache,
    ExternKernelCaller,
    ExternKernelChoice,
    TritonTemplate,
)
from torch._inductor.utils import get_gpu_shared_memory
from torch._inductor.virtualized import V

from ..use import choice_ids, flex_ranking
from ..collect import features
from ..policy import AutotuneRequest
from . import session

try:  # subgraph templates (decompose-k, ...) exist on the torch versions we support; kept optional
    from torch._inductor.codegen.subgraph import SubgraphTemplate
except ImportError:  # pragma: no cover - a torch without them
    SubgraphTemplate = ()


# a compiled FlexAttention candidate: ``triton_<template>_<n>`` (select_algorithm names template callers so)
_FLEX_CALLER = re.compile(r"triton_(%s)_\d+" % "|".join(sorted(flex_ranking.FLEX_OPS, key=len, reverse=True)))


def _hints(exprs) -> list[int]:
    sizevars = V.graph.sizevars
    fn = getattr(sizevars, "optimization_hints", None) or getattr(sizevars, "size_hints")
    return [int(v) for v in fn(exprs)]


def _at(exprs, assignment: dict) -> list[int]:
    return [int(e.subs(assignment)) if hasattr(e, "subs") else int(e) for e in exprs]


def node_description(node, assignment: dict | None = None) -> dict:
    """``{"size", "stride", "dtype", "contiguous"}`` of one input node: at its size hints, or with its size
    symbols at the values of ``assignment`` (``served_sizes``)."""
    layout = node.get_layout()
    if assignment is None:
        size, stride = _hints(node.get_size()), _hints(layout.stride)
    else:
        size, stride = _at(node.get_size(), assignment), _at(layout.stride, assignment)
    try:
        contiguous = bool(layout.is_contiguous()) if assignment is None else features.is_contiguous(size, stride)
    except Exception:  # a layout that cannot say: decide from the hints as Inductor would
        contiguous = features.is_contiguous(size, stride)
    return {"size": size, "stride": stride, "dtype": str(node.get_dtype()), "contiguous": contiguous}


def template_data_from_ktc(ktc) -> tuple[str, str, dict]:
    """(kind, name, params) of a ``KernelTemplateChoice`` (pre-codegen)."""
    template = ktc.template
    params = dict(ktc.params.to_kwargs()) if ktc.params is not None else {}
    if isinstance(template, ExternKernelChoice):
        return "extern", template.name, {}
    if isinstance(template, TritonTemplate):
        return "triton", template.name, params
    kind = "subgraph" if SubgraphTemplate and isinstance(template, SubgraphTemplate) else type(template).__name__.lower()
    return kind, template.name, params


def template_data_from_caller(caller) -> tuple[str, str, dict]:
    """(kind, name, params) of a ``ChoiceCaller`` that no KernelTemplateChoice produced (CPU C++, ...)."""
    ktc = (getattr(caller, "annotations", None) or {}).get("ktc")
    if ktc is not None:
        return template_data_from_ktc(ktc)
    if isinstance(caller, ExternKernelCaller):
        return "extern", caller.choice.name, {}
    flex = _FLEX_CALLER.fullmatch(str(getattr(caller, "name", "")))
    if flex is not None:  # a FlexAttention config: named by its own tunables (flex_ranking.config_id)
        info = caller.info_dict()
        return "flex", flex.group(1), {key: info[key] for key in flex_ranking.CONFIG_KEYS[flex.group(1)]}
    template = getattr(caller, "template", None)
    blocking = getattr(template, "register_blocking", None)
    if blocking is not None:  # the CPU C++ GEMM template (micro-GEMM name + register blocking)
        return "cpp", getattr(template, "name", "gemm"), {
            "register_blocking": (blocking.block_m, blocking.block_n, blocking.block_k)
        }
    try:
        info = caller.info_dict()
    except Exception:  # info_dict is best effort in Inductor too
        info = {}
    if "tile_shape" in info:  # a Triton template caller built without a KTC
        bm, bk, bn = ast.literal_eval(str(info["tile_shape"]))
        params = {"BLOCK_M": bm, "BLOCK_K": bk, "BLOCK_N": bn,
                  "num_stages": info.get("num_stages"), "num_warps": info.get("num_warps")}
        if "GROUP_M" in info:
            params["GROUP_M"] = info["GROUP_M"]
        return "triton", "mm", params
    try:
        return "other", caller.autoheuristic_id(), {}
    except Exception:  # no id of its own: the class and name still tell candidates apart
        return "other", f"{type(caller).__name__}_{getattr(caller, 'name', '')}", {}


def ktc_ids(ktcs) -> list[str]:
    """Unique ids of KernelTemplateChoices (pre-codegen)."""
    return choice_ids.unique_ids([choice_ids.choice_id(*template_data_from_ktc(k)) for k in ktcs])


def caller_ids(callers) -> list[str]:
    """Unique ids of ChoiceCallers (post-codegen); the same as ``ktc_ids`` for KTC-made callers."""
    raw = []
    for caller in callers:
        annotations = getattr(caller, "annotations", None) or {}
        raw.append(annotations.get("ah_plugin_id") or choice_ids.choice_id(*template_data_from_caller(caller)))
    return choice_ids.unique_ids(raw)


def is_extern_caller(caller) -> bool:
    """An aten (extern) candidate."""
    is_extern = getattr(AlgorithmSelectorCache, "_is_extern", None)
    return bool(is_extern(caller)) if is_extern is not None else isinstance(caller, ExternKernelCaller)


_device_info: dict = {}


def device_metadata(device) -> dict:
    """``device_capa``, ``shared_memory``, ``device_name`` of a torch.device (CPU: (0, 0), 0, "cpu")."""
    key = (device.type, device.index)
    if key in _device_info:
        return _device_info[key]
    info = {"device_capa": (0, 0), "shared_memory": 0, "device_name": device.type}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        info["device_capa"] = tuple(torch.cuda.get_device_capability(index))
        info["device_name"] = torch.cuda.get_device_name(index)
        try:
            info["shared_memory"] = int(get_gpu_shared_memory())
        except Exception:  # Inductor's query needs Triton's driver; the device properties say the same
            props = torch.cuda.get_device_properties(index)
            info["shared_memory"] = int(getattr(props, "shared_memory_per_block_optin", 0))
    _device_info[key] = info
    return info


def tf32_enabled() -> bool:
    matmul = torch.backends.cuda.matmul
    precision = getattr(matmul, "fp32_precision", None)
    if precision is not None:
        return precision == "tf32"
    return bool(getattr(matmul, "allow_tf32", False))


def build_request(op_name: str, nodes, candidates: list[str], stage: str, timing: str | None = None) -> AutotuneRequest:
    """An AutotuneRequest from Inductor input nodes (plain data from here on). ``timing``: the method the
    candidates are timed with in this autotuning (None: not timed, or Inductor's own). An input with
    symbolic sizes also gets the request at other sizes it serves (``variants``, ``served_sizes``)."""
    device = nodes[0].get_device()
    request = described_request(op_name, [node_description(n) for n in nodes], device, candidates, stage, timing)
    if flex_ranking.is_flex_op(op_name):
        call = session.innermost(session.FlexCall)
        request.context = dict(call.context) if call is not None else {}
    for assignment in served_sizes(nodes):
        tensors = [node_description(n, assignment) for n in nodes]
        request.variants.append(described_request(op_name, tensors, device, candidates, stage, timing))
    return request


# sizes a symbolic dimension is ranked at besides its hint: powers of two from its lower bound up to this
# multiple of the hint (and at least SERVED_UP_TO), within its upper bound
SERVED_HINT_MULTIPLE = 8
SERVED_UP_TO = 1024


def served_sizes(nodes) -> list[dict]:
    """Assignments of the backed size symbols of ``nodes`` to other values the compiled graph serves: each
    symbol in turn over powers of two within its range (its lower bound, then 2^i up to
    ``max(SERVED_UP_TO, SERVED_HINT_MULTIPLE * hint)``), the others at their hints. Empty for static sizes,
    and for sizes known only at run time (unbacked), which have no hint to rank at."""
    sizevars = V.graph.sizevars
    symbols: set = set()
    for node in nodes:
        for expr in (*node.get_size(), *node.get_layout().stride):
            symbols |= getattr(expr, "free_symbols", set())
    if not symbols:
        return []
    ranges = getattr(getattr(sizevars, "shape_env", None), "var_to_range", {})
    hints = {}
    for symbol in symbols:
        try:
            hints[symbol] = _hints([symbol])[0]
        except Exception:  # unbacked: no hint
            return []
    out = []
    for symbol in sorted(symbols, key=str):
        bounds = ranges.get(symbol)
        low = max(_bound(getattr(bounds, "lower", 1), 1), 1)
        high = _bound(getattr(bounds, "upper", None), None)
        top = max(SERVED_UP_TO, SERVED_HINT_MULTIPLE * hints[symbol])
        top = top if high is None else min(top, high)
        values = {low} | {1 << i for i in range(top.bit_length()) if low <= 1 << i <= top}
        for value in sorted(values - {hints[symbol]}):
            out.append({**hints, symbol: value})
    return out


def _bound(value, default):
    """A range bound as an int; ``default`` for an infinite or unknown one."""
    try:
        number = int(value)
    except Exception:  # sympy's infinities raise on int(), each its own way
        return default
    return number if abs(number) < 2**62 else default


def described_request(op_name: str, tensors: list[dict], device, candidates: list[str], stage: str,
                      timing: str | None = None) -> AutotuneRequest:
    """An AutotuneRequest from plain tensor descriptions (``size``, ``stride``, ``dtype``) on ``device``."""
    feats, num, cat = features.op_features(op_name, tensors, tf32_enabled())
    info = device_metadata(device)
    meta = features.metadata(op_name, num, cat, info["device_capa"], info["shared_memory"], info["device_name"],
                             timing=timing)
    return AutotuneRequest(
        op_name=op_name,
        features=features.ordered_features(feats, num, cat),
        metadata=meta,
        candidates=list(candidates),
        stage=stage,
        tensors=tensors,
    )


def default_log_path(op_name: str, device_name: str, device_type: str = "cuda") -> str:
    """Upstream's default: ``<inductor cache dir>/autoheuristic/<device>/<op>.txt``."""
    ident = device_name.replace(" ", "_") if device_type == "cuda" else "non_cuda_device"
    return os.path.join(cache_dir(), "autoheuristic", ident, f"{op_name}.txt")
