"""Stable, unique choice ids from plain template data.

A choice is described by ``(kind, name, params)``: ``kind`` is "extern", "triton", "subgraph", "cpp",
...; ``name`` the template's or kernel's name; ``params`` its config kwargs (block sizes, stages, ...).
The hook extracts these from Inductor objects; everything here is pure Python so that ids are testable
without Inductor and mean the same on every torch version.

Compatibility with torch's built-in AutoHeuristic (and the official A100/H100 data):

* aten kernels: ``extern_<name>`` (``extern_mm``, ``extern_addmm``, ``extern__mkl_linear``).
* the classic Triton mm template (``triton::mm``) with ``GROUP_M`` 8: exactly upstream's
  ``type=triton_BLOCK-M=.._BLOCK-K=.._BLOCK-N=.._numstages=.._numwarps=..``. Other GROUP_M values
  (the exhaustive space) append ``_GROUP-M=4``; upstream gave those the same id as GROUP_M 8.
* other Triton templates: ``type=triton-<template>_...`` (same fields plus the template's own config
  keys), so a persistent-TMA config never collides with the classic template's.
* subgraph templates: ``subgraph_<name>`` plus their kwargs (``subgraph_decompose_k_k_split=32``).
* the CPU C++ GEMM template: ``cpp_<micro gemm>_bm4_bn16_bk1`` (register blocking).
* FlexAttention configs: ``flex_BLOCK-M=.._BLOCK-N=.._numstages=.._numwarps=..`` (``flexdecode_``,
  ``flexbwd_``: ``flex_ranking.config_id``), the same before code generation and after it.

``unique_ids`` makes the ids of one autotuning unique deterministically (``#2``, ``#3`` ... in
Inductor's order) for the rare templates whose config does not distinguish them.
"""

from __future__ import annotations

from . import flex_ranking

# Config keys that distinguish Triton candidates; other kwargs (EVEN_K, ACC_TYPE, ALLOW_TF32, ...)
# are derived from the input and equal for every candidate of one autotuning.
_TRITON_EXTRA_KEYS = (
    "GROUP_M",
    "NUM_SMS",
    "TMA_SIZE",
    "EPILOGUE_SUBTILE",
    "WARP_SPECIALIZE",
    "FLATTEN",
    "NUM_CONSUMER_GROUPS",
    "num_consumer_groups",
    "num_buffers_warp_spec",
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "kpack",
)
_DEFAULT_GROUP_M = 8


def _fmt(value) -> str:
    text = str(value)
    return text.replace(",", ";").replace(" ", "").replace("\n", "")


def triton_id(name: str, params: dict) -> str:
    """Id of a Triton template config. ``params`` needs BLOCK_M/N/K, num_stages, num_warps."""
    kind = "triton" if name == "mm" else f"triton-{name}"
    text = (
        f"type={kind}_BLOCK-M={params['BLOCK_M']}_BLOCK-K={params['BLOCK_K']}"
        f"_BLOCK-N={params['BLOCK_N']}_numstages={params['num_stages']}"
        f"_numwarps={params['num_warps']}"
    )
    for key in _TRITON_EXTRA_KEYS:
        if key not in params or key == "NUM_SMS":
            continue  # NUM_SMS is the device's SM count, not a choice
        value = params[key]
        if key == "GROUP_M" and value == _DEFAULT_GROUP_M:
            continue  # upstream id: GROUP_M 8 is implied
        text += f"_{key.replace('_', '-')}={_fmt(value)}"
    return text


def choice_id(kind: str, name: str, params: dict | None = None) -> str:
    """The id of one candidate from plain data (see the module docstring for the scheme)."""
    params = params or {}
    if kind == "extern":
        return f"extern_{name}"
    if kind == "triton":
        if all(k in params for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")):
            return triton_id(name, params)
        extras = "_".join(f"{k}={_fmt(v)}" for k, v in sorted(params.items()))
        return f"type=triton-{name}" + (f"_{extras}" if extras else "")
    if kind == "flex":
        return flex_ranking.config_id(name, params)
    if kind == "cpp":
        blocking = params.get("register_blocking")
        if blocking is not None and len(blocking) == 3:
            bm, bn, bk = blocking
            return f"cpp_{name}_bm{bm}_bn{bn}_bk{bk}"
        return f"cpp_{name}"
    extras = "_".join(f"{k}={_fmt(v)}" for k, v in sorted(params.items()))
    return f"{kind}_{name}" + (f"_{extras}" if extras else "")


# quality mode's padded candidate (ah_plugin/inductor/padded_choice.py): a subgraph template of this name
PADDED_CHOICE_NAME = "ah_padded_mm"
PADDED_CHOICE_ID = f"subgraph_{PADDED_CHOICE_NAME}"


def unique_ids(ids: list[str]) -> list[str]:
    """Same ids, the 2nd, 3rd ... repeat of one id suffixed ``#2``, ``#3`` (order-deterministic)."""
    seen: dict[str, int] = {}
    out = []
    for cid in ids:
        count = seen.get(cid, 0) + 1
        seen[cid] = count
        out.append(cid if count == 1 else f"{cid}#{count}")
    return out


def base_id(cid: str) -> str:
    """An id without its disambiguation suffix."""
    head, sep, tail = cid.rpartition("#")
    return head if sep and tail.isdigit() else cid
