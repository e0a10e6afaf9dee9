"""The plugin's adapter to Inductor: puts the hooks in and takes them out, row by row of the contract.

The rest of ``ah_plugin`` (and ``torchgen_ah``, the benchmarks) sees plain data: policies get
``AutotuneRequest``s, and the tools get the functions of the facades ``compile_tools``, ``graph_trees``,
``generated_code_capture`` and ``collection`` (tests/test_adapter_boundary.py holds the rule). What goes in
is the table of ``contract.py``, each row on its own: a row whose probe fails on this torch stays out and is
named once with the capability it switches off; the others go in. What each hook then does is read from the
settings at each call (``plans``); one autotuning's state is its session (``session``).

Importing this module imports Inductor; ``ah_plugin`` imports it when a switch asks for the plugin and
torch has imported Inductor (``on_import``: ``import torch`` stays free of it).
"""

from __future__ import annotations

import importlib

import torch

from ..collect import collector
from ..config import settings
from ..report.messages import warn, warn_once
from ..report.verbose_output import verbose
from . import contract, plans
from .patches import builtin_autoheuristic
from .requests import build_request, caller_ids, default_log_path, ktc_ids

_installed: list = []  # the rows put in, in order


def is_installed() -> bool:
    return plans.installed()


def _module(hook: contract.Hook):
    return importlib.import_module(f"{__package__}.{hook.module}")


def install() -> dict[str, str]:
    """Put in every hook of the contract this torch has (idempotent); returns {hook: what is wrong} of
    those left out or put in only in part. Which ops they act on is read from the settings at each call."""
    verdicts = contract.check()
    for hook in contract.HOOKS:
        problem = verdicts[hook.name]
        if hook.module is None or hook.name in _installed or (problem and not hook.partial):
            continue
        try:
            _module(hook).install()
            _installed.append(hook.name)
        except Exception as exc:  # this row only: the others go in
            verdicts[hook.name] = f"could not be put in ({type(exc).__name__}: {exc})"
            _take_out(hook)
    plans.set_installed(True)
    collector.use_default_log_path(default_log_path)
    contract.report(verdicts, lambda message: warn(message, RuntimeWarning), verbose)  # each row once
    lacking = builtin_autoheuristic.builtin_lacks(settings.builtin_only_requested())
    if lacking:
        warn_once("builtin_lacks", f"ah_plugin: torch {torch.__version__}'s built-in AutoHeuristic has no "
                  f"{', '.join(lacking)}; naming it in {settings.ENV_USE} or {settings.ENV_COLLECT} does "
                  "nothing on this torch")
    return {name: problem for name, problem in verdicts.items() if problem}


def _take_out(hook: contract.Hook) -> None:
    try:
        _module(hook).uninstall()
    except Exception as exc:  # never fail a switch-off; say what stayed
        warn_once(("uninstall", hook.name), f"ah_plugin: {hook.name} could not be taken out ({exc!r})")


def uninstall() -> None:
    """Undo ``install``: Inductor's functions, choices class and this thread's handler as they were."""
    if not plans.installed():
        return
    for name in reversed(_installed):
        _take_out(contract.BY_NAME[name])
    _installed.clear()
    plans.set_installed(False)


builtin_would_act = builtin_autoheuristic.builtin_would_act

__all__ = ["install", "uninstall", "is_installed", "build_request", "caller_ids", "ktc_ids", "default_log_path",
           "builtin_would_act"]
