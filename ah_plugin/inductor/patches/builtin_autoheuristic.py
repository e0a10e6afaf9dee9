"""Keep torch's built-in AutoHeuristic off the ops the plugin handles.

The plugin answers to the same variables as the built-in (``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT`` /
``_USE``), so without this both would prune or log the same autotunings. Inductor decides through
``config.collect_autoheuristic(op)`` / ``use_autoheuristic(op)``, module functions that read the
environment on each call (no config entry to set for ``mm`` on 2.13), and ``run_autoheuristic`` calls
them through the module's globals: those two are wrapped, and answer False for the plugin's ops.

Checked on torch 2.11 and 2.13.
"""

from __future__ import annotations

import torch._inductor.config as inductor_config

from .. import contract, plans

_NAMES = ("collect_autoheuristic", "use_autoheuristic")
_saved: dict = {}


def install() -> None:
    """Wrap the two functions; ``plans.handled_ops()`` gives the ops the plugin takes over, at each call."""
    for name in _NAMES:
        original = inductor_config.__dict__.get(name)
        if original is None or name in _saved:
            continue
        _saved[name] = original

        def wrapper(op_name, _original=original):
            contract.note("builtin_gate")
            if op_name in plans.handled_ops():
                return False
            return _original(op_name)

        wrapper.__name__ = name
        wrapper.__wrapped__ = original
        inductor_config.__dict__[name] = wrapper


def uninstall() -> None:
    for name, fn in _saved.items():
        inductor_config.__dict__[name] = fn
    _saved.clear()


def builtin_lacks(ops) -> list[str]:
    """Those of ``ops`` torch's built-in AutoHeuristic no longer has on this torch (torch 2.15 dropped
    ``mixed_mm``; from 2.13 on its ops are the entries of ``config.autoheuristic_use``)."""
    known = getattr(inductor_config, "autoheuristic_use", None)
    if known is None or isinstance(known, str):  # torch 2.11: a plain list in a string, every op named
        return []
    return sorted(op for op in ops if not hasattr(known, op))


def builtin_would_act(op_name: str) -> bool:
    """What torch's built-in AutoHeuristic decides for ``op_name`` now (for tests and docs)."""
    return bool(inductor_config.run_autoheuristic(op_name))
