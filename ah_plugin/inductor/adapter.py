"""The plugin's adapter to Inductor: the only package that uses ``torch._inductor`` or Dynamo's internals.

The rest of ``ah_plugin`` (and ``torchgen_ah``, the benchmarks) sees plain data: policies get
``AutotuneRequest``s, and the tools get the functions of the facades ``compile_tools``, ``graph_trees``,
``generated_code_capture`` and ``collection`` (tests/test_adapter_boundary.py holds the rule). What
is installed, and where each piece hooks in (docs/inductor_versions.md has the table per torch version):

* ``choices.PluginChoices``, an ``InductorChoices`` subclass set as ``config.inductor_choices_class``:
  widens and prunes GEMM candidates before code generation, and keys compiled graphs by the settings;
* ``autotune.preprocess`` (``select_algorithm.add_preprocessing_fn``) and ``autotune.feedback``
  (``add_feedback_saver``): pruning where the first hook cannot see, the numerical check, the
  benchmark plan, the timings to the policies, the aten margin;
* the patches of ``patches/`` for what Inductor has no override point for (fast mode's GEMM-only
  ``mode="max-autotune"`` and quality mode's fused-group timing among them).

Importing this package imports Inductor; ``ah_plugin`` imports it when a switch asks for the plugin and
torch has imported Inductor (``ah_plugin.inductor.on_import``: ``import torch`` stays free of it).
"""

from __future__ import annotations

import uuid as _uuid

import torch
import torch._inductor.config as inductor_config
from torch._inductor import select_algorithm

from ..collect import collector
from ..policy import registry
from ..config import settings
from . import autotune, choices, contract
from .patches import benchmarker, builtin_autoheuristic, compile_once, fusion_timing, lowerings, mode_options, pad_mm
from .requests import build_request, caller_ids, default_log_path, device_metadata, ktc_ids

_state = {"callbacks": False, "installed": False, "nonce": _uuid.uuid4().hex}


def _handled_ops() -> frozenset:
    if not _state["installed"]:
        return frozenset()
    current = autotune._current_settings()
    return current.handled_ops if current is not None else frozenset()


def _acting() -> bool:
    if not _state["installed"]:
        return False
    current = autotune._current_settings()
    return current is not None and current.active


def _mode_plan():
    """What fast or quality mode changes in ``mode="max-autotune"`` now (patches/mode_options.py); None:
    nothing."""
    current = autotune._current_settings() if _state["installed"] else None
    if current is None or not (current.gemm_only or current.persistent_tma):
        return None
    return {"gemm_only": current.gemm_only, "persistent_tma": current.persistent_tma,
            "no_fusion_benchmark": current.skip_fusion_benchmark, "verbose": current.verbose}


def _lowering_plan(name: str, args=()):
    """How a GEMM lowering of autotuning ``name`` goes (patches/lowerings.py): ``TUNED`` where a ranking or
    the results cache may keep a template (lowered as off when they keep aten alone), ``OFF`` in the modes
    that narrow ``mode="max-autotune"`` to GEMMs for an op no ranking covers (a convolution keeps cuDNN with
    off's lowering), None where Inductor's own lowering stands (collection, the plugin off).

    A convolution is ``OFF`` there even when the use variable names it, unless an artifact ranks
    convolutions on its device: max-autotune's lowering rewrites a channels-last 1x1 convolution as an mm
    before any candidate exists, so a lowering tried first and redone would not be off's (the mms it made
    are ranked and timed as mms)."""
    current = autotune._current_settings() if _state["installed"] else None
    if current is None or not current.active or name in current.collect_ops:
        return None
    named_as = lowerings.AUTOTUNED_AS.get(name)
    if named_as is not None:  # off's lowering in the GEMM-only modes unless one of its names is collected or used
        named = any(n in current.collect_ops or n in current.use_ops for n in named_as)
        return lowerings.OFF if current.gemm_only and not named else None
    if name in current.use_ops:
        if name in REWRITTEN_BEFORE_CANDIDATES and current.gemm_only and not _ranked_on(name, args):
            return lowerings.OFF
        return lowerings.TUNED
    if current.gemm_only:
        return lowerings.OFF
    return lowerings.TUNED if registry.policies_for(name) else None


REWRITTEN_BEFORE_CANDIDATES = ("convolution",)


def _ranked_on(name: str, args) -> bool:
    """Whether a ranking policy has an artifact for ``name`` on the device of the lowering's first input."""
    try:
        device = args[0].get_device()
    except Exception:  # no input with a device: nothing can rank it
        return False
    metadata = {"name": name, **device_metadata(device)}
    for policy in registry.policies_for(name):
        artifact_for = getattr(policy, "artifact_for", None)
        if artifact_for is not None and registry.call_policy(policy, "artifact_for", name, metadata) not in (
                None, registry.FAILED):
            return True
    return False


def _compile_once() -> bool:
    current = autotune._current_settings() if _state["installed"] else None
    return current is not None and current.compile_once


def _fusion_margin():
    """Quality mode with replay timing: the margin a fused template must win its group by
    (patches/fusion_timing.py); else None (Inductor's own fused-group timing)."""
    current = autotune._current_settings() if _state["installed"] else None
    if current is None or not current.active or not current.fused_group_by_replay:
        return None
    return current.aten_margin


def _timing():
    current = autotune._current_settings()
    return current.timing if current is not None else None


def is_installed() -> bool:
    return _state["installed"]


def install() -> None:
    """Install every hook (idempotent). Which ops they act on is read from the settings at each call."""
    if not _state["callbacks"]:
        # Inductor has no "remove one callback" API: these stay and do nothing while uninstalled
        select_algorithm.add_preprocessing_fn(_preprocess)
        select_algorithm.add_feedback_saver(_feedback)
        _state["callbacks"] = True
    if _state["installed"]:
        return
    builtin_autoheuristic.install(_handled_ops)
    pad_mm.install(_acting, _timing)
    mode_options.install(_mode_plan)
    lowerings.install(_lowering_plan)
    compile_once.install(_acting, _compile_once)
    fusion_timing.install(_fusion_margin)
    choices.install(inductor_config, _state["nonce"])
    collector.use_default_log_path(default_log_path)
    _state["installed"] = True
    contract.report(lambda message: registry.warn_once("contract", message), registry.verbose)
    lacking = builtin_autoheuristic.builtin_lacks(settings.builtin_only_requested())
    if lacking:
        registry.warn_once("builtin_lacks", f"ah_plugin: torch {torch.__version__}'s built-in AutoHeuristic has no "
                           f"{', '.join(lacking)}; naming it in {settings.ENV_USE} or {settings.ENV_COLLECT} does "
                           "nothing on this torch")


def uninstall() -> None:
    """Undo ``install``: Inductor's functions, choices class and this thread's handler as they were."""
    if not _state["installed"]:
        return
    builtin_autoheuristic.uninstall()
    pad_mm.uninstall()
    mode_options.uninstall()
    lowerings.uninstall()
    compile_once.uninstall()
    fusion_timing.uninstall()
    benchmarker.uninstall()
    choices.uninstall(inductor_config)
    _state["installed"] = False


def _preprocess(choices_):
    if not _state["installed"]:
        return choices_
    contract.note("preprocessing")
    return autotune.preprocess(choices_)


def _feedback(timings, name, input_nodes, choices_, profiled_time_fn=None, precompile_times=None):
    if _state["installed"]:
        contract.note("feedback")
        autotune.feedback(timings, name, input_nodes, choices_, profiled_time_fn, precompile_times)


builtin_would_act = builtin_autoheuristic.builtin_would_act

__all__ = ["install", "uninstall", "is_installed", "build_request", "caller_ids", "ktc_ids", "default_log_path",
           "builtin_would_act"]
