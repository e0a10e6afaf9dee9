"""Fast and quality modes' ``torch.compile(mode="max-autotune")``: autotune the GEMMs, not every kernel.

``mode="max-autotune"`` (and ``"max-autotune-no-cudagraphs"``) sets ``max_autotune`` and
``coordinate_descent_tuning``: besides the GEMMs, every pointwise and reduction kernel is compiled in
several configs and benchmarked, then tuned by coordinate descent. On an H200 that is most of the compile
time fast mode has left over max-autotune off (GPT-2 small: 38 s with aten as the only GEMM choice
against 18 s off). While fast or quality mode is on, the mode's options become ``max_autotune_gemm`` in
their place: GEMMs are autotuned (and ranked by the plugin), everything else is compiled as with
max-autotune off; CUDA graphs stay as the mode says. ``AH_PLUGIN_NON_GEMM=tune`` keeps the mode as torch
defines it. Quality mode also switches on Inductor's persistent TMA mm template
(``triton.enable_persistent_tma_matmul``; Inductor offers it only on GPUs that can run it), so the
ranking can pick it. Options passed explicitly (``options={"max_autotune": True}``) are the user's and
are never changed.

Fast mode also benchmarks no template fused with its epilogue (``max_epilogue_benchmarked_choices`` 0;
``max_template_fusion_benchmarked_choices`` from torch 2.15).
With Inductor's default the scheduler compiles a copy of each kept template fused with each epilogue and
times it, one GEMM after another: in the phase times of one compile of the Llama-style decoder at decode
on an H200 (nine template-and-aten GEMMs), that was 4.0 s of 13.2 s, against 8.6 s with aten alone
(benchmarks/runs/fast_h200_models/decode_phase_times.txt). Without it, the kept templates precompile in
parallel from lowering, the autotuner times each against aten as before, and a template that wins runs
without its epilogue fused in, as aten does. Inductor would still compile and time each such epilogue
(or prologue) alone, for a comparison no fused template enters; the plugin answers that time uncompiled
(``patches/fusion_timing.py``). The templates'
own compiles remain: in fresh processes the decoder still compiled in 1.41x max-autotune off's time with
this setting, about as with ``benchmark_epilogue_fusion`` off (1.44x), which instead precompiles each
template while its GEMM is lowered, one after another. Quality mode keeps Inductor's default (its bar is
default max-autotune's compile time, not off's).

``torch.compile`` looks the function up as ``torch._inductor.list_mode_options`` when it is called, so
replacing that attribute is enough. Checked on torch 2.11 and 2.13.
"""

from __future__ import annotations

import logging

import torch._inductor as inductor_package
import torch._inductor.config as inductor_config

from ...report import verbose_output
from .. import contract, plans

logger = logging.getLogger(__name__)

TUNED_MODES = ("max-autotune", "max-autotune-no-cudagraphs")
_NON_GEMM_TUNING = ("max_autotune", "coordinate_descent_tuning")
PERSISTENT_TMA = "triton.enable_persistent_tma_matmul"
# how many templates fused with their epilogue Inductor benchmarks; torch 2.15 renamed it (the old name a
# deprecated alias that warns on every use)
FUSED_BENCHMARKS = ("max_template_fusion_benchmarked_choices", "max_epilogue_benchmarked_choices")


def fused_benchmarks_entry() -> str | None:
    """The name of that entry on this torch (None: it has neither)."""
    return next((name for name in FUSED_BENCHMARKS if hasattr(inductor_config, name)), None)
_saved: dict = {}
_said: set = set()


def gemm_only(options: dict) -> dict:
    """``options`` of a max-autotune mode with its non-GEMM tuning left out (GEMM autotuning kept)."""
    out = {k: v for k, v in options.items() if k not in _NON_GEMM_TUNING}
    if options.get("max_autotune"):
        out["max_autotune_gemm"] = True
    return out


def narrowed(options: dict, plan: dict) -> dict:
    """``options`` of a max-autotune mode changed as ``plan`` says (``gemm_only``, ``persistent_tma``,
    ``no_fusion_benchmark``)."""
    out = gemm_only(options) if plan.get("gemm_only") else dict(options)
    if plan.get("persistent_tma") and hasattr(inductor_config.triton, PERSISTENT_TMA.split(".")[1]):
        contract.note("persistent_tma")
        out[PERSISTENT_TMA] = True
    fused = fused_benchmarks_entry()
    if plan.get("no_fusion_benchmark") and fused is not None:  # each missing entry is named by the contract
        contract.note("fused_benchmarks")
        out[fused] = 0
    return out


def install() -> None:
    """Wrap ``list_mode_options``. ``plans.mode()`` says, at each call, what the plugin's mode changes:
    None (nothing), else ``{"gemm_only": bool, "persistent_tma": bool, "no_fusion_benchmark": bool,
    "verbose": bool}``."""
    if "list_mode_options" in _saved:
        return
    original = inductor_package.list_mode_options
    _saved["list_mode_options"] = original

    def list_mode_options(mode=None, dynamic=None):
        options = original(mode, dynamic)
        if mode not in TUNED_MODES or not isinstance(options, dict):
            return options
        plan = plans.mode()
        if not plan:
            return options
        contract.note("mode_options")
        if plan.get("verbose") and mode not in _said:
            _said.add(mode)
            what = "autotunes GEMMs only" if plan.get("gemm_only") else "keeps max-autotune's tuning"
            tma = ", with the persistent TMA template" if plan.get("persistent_tma") else ""
            tma += ", benchmarking no template fused with its epilogue" if plan.get("no_fusion_benchmark") else ""
            hint = " (AH_PLUGIN_NON_GEMM=tune keeps max-autotune's tuning of the other kernels)" \
                if plan.get("gemm_only") else ""
            verbose_output.say(logger, f"ah_plugin: mode={mode!r} {what}{tma}{hint}")
        return narrowed(options, plan)

    list_mode_options.__wrapped__ = original
    list_mode_options.__doc__ = original.__doc__
    inductor_package.list_mode_options = list_mode_options


def uninstall() -> None:
    if "list_mode_options" in _saved:
        inductor_package.list_mode_options = _saved.pop("list_mode_options")
