"""The plugin's adapter to Inductor: the only package that imports ``torch._inductor``.

The rest of ``ah_plugin`` (and ``torchgen_ah``, the benchmarks) sees plain data: policies get
``AutotuneRequest``s, and the tools get the functions of ``compile_tools`` and ``collection``. What
is installed, and where each piece hooks in (docs/inductor_versions.md has the table per torch version):

* ``choices.PluginChoices``, an ``InductorChoices`` subclass set as ``config.inductor_choices_class``:
  widens and prunes GEMM candidates before code generation, and keys compiled graphs by the settings;
* ``autotune.preprocess`` (``select_algorithm.add_preprocessing_fn``) and ``autotune.feedback``
  (``add_feedback_saver``): pruning where the first hook cannot see, the numerical check, the
  benchmark plan, the timings to the policies, the aten margin;
* the patches of ``patches/`` for what Inductor has no override point for (fast mode's GEMM-only
  ``mode="max-autotune"`` among them).

Importing this package imports Inductor; ``ah_plugin`` imports it when a switch asks for the plugin and
torch has imported Inductor (``ah_plugin.on_inductor_import``: ``import torch`` stays free of it).
"""

from __future__ import annotations

import uuid as _uuid

import torch._inductor.config as inductor_config
from torch._inductor import select_algorithm

from .. import registry
from . import autotune, choices
from .patches import benchmarker, builtin_autoheuristic, compile_once, mode_options, pad_mm
from .requests import build_request, caller_ids, default_log_path, ktc_ids

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


def _compile_once() -> bool:
    current = autotune._current_settings() if _state["installed"] else None
    return current is not None and current.compile_once


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
    compile_once.install(_acting, _compile_once)
    choices.install(inductor_config, _state["nonce"])
    _state["installed"] = True


def uninstall() -> None:
    """Undo ``install``: Inductor's functions, choices class and this thread's handler as they were."""
    if not _state["installed"]:
        return
    builtin_autoheuristic.uninstall()
    pad_mm.uninstall()
    mode_options.uninstall()
    compile_once.uninstall()
    benchmarker.uninstall()
    choices.uninstall(inductor_config)
    _state["installed"] = False


def _preprocess(choices_):
    if not _state["installed"]:
        return choices_
    return autotune.preprocess(choices_)


def _feedback(timings, name, input_nodes, choices_, profiled_time_fn=None, precompile_times=None):
    if _state["installed"]:
        autotune.feedback(timings, name, input_nodes, choices_, profiled_time_fn, precompile_times)


builtin_would_act = builtin_autoheuristic.builtin_would_act

__all__ = ["install", "uninstall", "is_installed", "build_request", "caller_ids", "ktc_ids", "default_log_path",
           "builtin_would_act"]


def _finish_import() -> None:
    """The activation ``import torch``'s entry point deferred while this package was first imported."""
    import ah_plugin  # the parent package, imported before this one

    try:
        ah_plugin.finish_pending_activation()
    except Exception as exc:  # as the entry point: never break the import
        registry.warn_once("activate", f"ah_plugin: not activated ({exc!r}); torch runs without it")


_finish_import()
