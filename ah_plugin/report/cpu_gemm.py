"""What the plugin says when a GEMM it was asked about is not autotuned by Inductor at all.

Inductor autotunes GEMMs only under max-autotune (``torch.compile(mode="max-autotune")``, or its
``max_autotune_gemm`` option): without it every GEMM is lowered with one choice, so COLLECT would log
nothing and USE prune nothing, silently (``note_no_max_autotune``). On the CPU it also needs a constant
weight it can pack: ``freezing`` on and the model run under ``torch.no_grad()``. That GEMM is then named
``packed_linear``, which ``mm`` covers. Any other CPU mm or addmm (a training step, inference without
freezing) is lowered to aten with nothing to choose from (``note_not_autotuned``). The adapter asks at each
such lowering; this module says each once and counts them for the exit line.
"""

from __future__ import annotations

from .messages import warn_once

GEMMS = frozenset({"mm", "addmm"})
FIX = ("On the CPU, Inductor autotunes a GEMM only when its weight is a constant: set "
       "TORCHINDUCTOR_FREEZING=1 (Inductor's freezing option) and run the model under torch.no_grad() (inference); "
       "the plugin then handles that GEMM as packed_linear, which mm covers")

MAX_AUTOTUNE_FIX = ('compile with torch.compile(mode="max-autotune") (or set TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1); '
                    "collection and use mode act only on the GEMMs it autotunes")

counts = {"not_autotuned": 0,  # CPU GEMMs lowered with one choice while the plugin was asked about them
          "no_max_autotune": 0}  # GEMMs it was asked about, lowered with one choice because max-autotune is off


def asked_about(op_name: str, current) -> bool:
    """Whether the settings ask the plugin about this CPU GEMM (by its name, or through ``mm``)."""
    if op_name not in GEMMS:
        return False
    return op_name in current.collect_ops or op_name in current.use_ops or "mm" in (current.collect | current.use)


def _wanted(current) -> str:
    wanted = []
    if current.collect:
        wanted.append(f"TORCHINDUCTOR_AUTOHEURISTIC_COLLECT={','.join(sorted(current.collect))} has nothing to log")
    if current.use:
        wanted.append(f"TORCHINDUCTOR_AUTOHEURISTIC_USE={','.join(sorted(current.use))} has nothing to prune")
    return " and ".join(wanted)


def message(op_name: str, current) -> str:
    """The one plain sentence: what was asked, why it cannot act, what to set instead."""
    return (f"Inductor does not autotune this CPU {op_name} (aten is its only choice), so "
            f"{_wanted(current)} for it. {FIX}.")


def no_max_autotune_message(op_name: str, current) -> str:
    """The sentence for a GEMM lowered with one choice because max-autotune is off."""
    return (f"Inductor autotunes GEMMs only under max-autotune, which is off for this {op_name}, so "
            f"{_wanted(current)} for it: {MAX_AUTOTUNE_FIX}.")


def note_not_autotuned(op_name: str, current) -> None:
    """Count a CPU GEMM lowered with a single choice; the first one the plugin was asked about is said."""
    if not asked_about(op_name, current):
        return
    counts["not_autotuned"] += 1
    warn_once("cpu_gemm_not_autotuned", message(op_name, current))


def note_no_max_autotune(op_name: str, current, cpu: bool = False) -> None:
    """Count a GEMM the plugin was asked about, lowered with one choice because max-autotune is off; the
    first is said (for a CPU mm or addmm, with what the CPU needs besides)."""
    if op_name not in current.collect_ops and op_name not in current.use_ops and not asked_about(op_name, current):
        return
    counts["no_max_autotune"] += 1
    text = no_max_autotune_message(op_name, current)
    if cpu and op_name in GEMMS:
        text += f" {FIX}."
    warn_once("no_max_autotune", text)
