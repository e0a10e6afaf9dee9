"""What the plugin says when a CPU GEMM it was asked about is not autotuned by Inductor at all.

On the CPU, Inductor autotunes a GEMM only when its weight is a constant it can pack: ``freezing`` on and
the model run under ``torch.no_grad()``. That GEMM is then named ``packed_linear``, which ``mm`` covers. Any
other CPU mm or addmm (a training step, inference without freezing) is lowered to aten with nothing to
choose from, so COLLECT=mm would log nothing and USE=mm prune nothing, silently. The adapter asks
``note_not_autotuned`` at each such lowering; this module says so once and counts them for the exit line.
"""

from __future__ import annotations

from .messages import warn_once

GEMMS = frozenset({"mm", "addmm"})
FIX = ("On the CPU, Inductor autotunes a GEMM only when its weight is a constant: set "
       "TORCHINDUCTOR_FREEZING=1 (Inductor's freezing option) and run the model under torch.no_grad() (inference); "
       "the plugin then handles that GEMM as packed_linear, which mm covers")

counts = {"not_autotuned": 0}  # CPU GEMMs lowered with one choice while the plugin was asked about them


def asked_about(op_name: str, current) -> bool:
    """Whether the settings ask the plugin about this CPU GEMM (by its name, or through ``mm``)."""
    if op_name not in GEMMS:
        return False
    return op_name in current.collect_ops or op_name in current.use_ops or "mm" in (current.collect | current.use)


def message(op_name: str, current) -> str:
    """The one plain sentence: what was asked, why it cannot act, what to set instead."""
    wanted = []
    if current.collect:
        wanted.append(f"TORCHINDUCTOR_AUTOHEURISTIC_COLLECT={','.join(sorted(current.collect))} has nothing to log")
    if current.use:
        wanted.append(f"TORCHINDUCTOR_AUTOHEURISTIC_USE={','.join(sorted(current.use))} has nothing to prune")
    return (f"Inductor does not autotune this CPU {op_name} (aten is its only choice), so "
            f"{' and '.join(wanted)} for it. {FIX}.")


def note_not_autotuned(op_name: str, current) -> None:
    """Count a CPU GEMM lowered with a single choice; the first one the plugin was asked about is said."""
    if not asked_about(op_name, current):
        return
    counts["not_autotuned"] += 1
    warn_once("cpu_gemm_not_autotuned", message(op_name, current))
