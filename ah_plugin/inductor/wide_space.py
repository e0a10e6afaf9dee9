"""The wider Triton mm search space, added before code generation.

Configs from Inductor's exhaustive mm list that this device can run (``ah_plugin.collect.search_space`` decides
which) join the candidates of an mm/addmm/bmm on CUDA. Collect mode benchmarks a deterministic sample
of them per input; use mode offers all of them to the ranking. Only the classic Triton mm template is
widened; anything else is left as it is.

Checked on torch 2.11 and 2.13 (``InductorChoices.get_ktc``, ``config.max_autotune_gemm_search_space``).
"""

from __future__ import annotations

import torch._inductor.config as inductor_config
from torch._inductor.select_algorithm import TritonTemplate

from ..use import choice_ids
from ..report.verbose_output import verbose
from ..collect import search_space
from .requests import build_request, device_metadata, ktc_ids

WIDENED_OPS = ("mm", "addmm", "bmm")


def widened(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides, current) -> list:
    """``ktcs`` plus the exhaustive configs that fit this device (sampled per input in collect mode)."""
    if kernel_inputs.device_type != "cuda" or op_name not in WIDENED_OPS:
        return ktcs
    mm_templates = [t for t in templates if isinstance(t, TritonTemplate) and t.name in ("mm", "bmm")]
    if not mm_templates:
        return ktcs
    template = mm_templates[0]
    overrides = (kwarg_overrides or {}).get(template.uid, {})
    with inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE"):
        extra = list(handler.get_ktc(kernel_inputs, template, op_name, overrides))
    existing = set(ktc_ids(ktcs))
    info = device_metadata(kernel_inputs.nodes()[0].get_device())
    dtype_size = kernel_inputs.nodes()[0].get_dtype().itemsize
    candidates = []
    for ktc in extra:
        params = ktc.params.to_kwargs()
        cid = choice_ids.choice_id("triton", template.name, params)
        if cid in existing or not search_space.fits_device(params, dtype_size, info["shared_memory"]):
            continue
        existing.add(cid)
        candidates.append((cid, ktc))
    if op_name in current.collect:
        feats = build_request(op_name, kernel_inputs.nodes(), [], "pre_codegen").features
        picked = set(search_space.sample(sorted(cid for cid, _ in candidates), current.search_sample, feats))
        candidates = [(cid, ktc) for cid, ktc in candidates if cid in picked]
    verbose(f"{op_name}: search space adds {len(candidates)} configs to {len(ktcs)}")
    return list(ktcs) + [ktc for _, ktc in candidates]
