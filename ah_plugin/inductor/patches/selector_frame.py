"""The op name and inputs of the autotuning a preprocessing function serves.

Inductor hands preprocessing functions (``select_algorithm.add_preprocessing_fn``) the candidate list
only; the op name, input nodes, layout and input generators are arguments of the
``AlgorithmSelectorCache.__call__`` that called it, two frames up. They are read from there.

Checked on torch 2.11 and 2.13 (``__call__(self, name, choices, input_nodes, layout, input_gen_fns, ...)``).
"""

from __future__ import annotations

import sys

from .. import contract


def selector_locals(depth: int = 2) -> dict | None:
    """Locals of the ``AlgorithmSelectorCache.__call__`` above the caller, or None when not found."""
    frame = sys._getframe(depth)
    for _ in range(4):
        if frame is None:
            break
        local = frame.f_locals
        if "name" in local and "input_nodes" in local and "choices" in local:
            contract.note("selector_frame")
            return local
        frame = frame.f_back
    return None
