"""The feedback saver the adapter registers with Inductor (``select_algorithm.add_feedback_saver``): every
autotuning's timings to ``autotune.feedback``. Inductor has no call to remove one, so it stays registered and
does nothing while the plugin is uninstalled."""

from __future__ import annotations

from torch._inductor import select_algorithm

from . import autotune, contract, plans

_state = {"registered": False}


def _feedback(timings, name, input_nodes, choices, profiled_time_fn=None, precompile_times=None):
    if plans.installed():
        contract.note("feedback")
        autotune.feedback(timings, name, input_nodes, choices, profiled_time_fn, precompile_times)


def install() -> None:
    if not _state["registered"]:
        select_algorithm.add_feedback_saver(_feedback)
        _state["registered"] = True


def uninstall() -> None:
    """Nothing to take out: the saver is inert while the plugin is uninstalled."""
