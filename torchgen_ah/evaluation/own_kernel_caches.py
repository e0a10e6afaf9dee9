"""Each mode of a shared process compiles its kernels cold, in Inductor and Triton caches of its own.

Inductor names each Triton kernel of a graph with a running number (``triton_poi_fused_add_7``), and the
name is part of the kernel's source, by which Inductor's and Triton's caches key it. A mode that adds kernels
(a GEMM kept on a Triton template where max-autotune off calls cuBLAS) renumbers every kernel after them, so
in a process where off compiled first that mode recompiles kernels that a control with off's code finds
compiled. A compile estimate of the mode over the control (``zoo_one_process``) then charged the mode for
kernels off's own fresh compile paid too: on the H200 the Llama-style decoder at decode, whose fast mode kept
two templates (the first early in the graph) beside off's ten other kernels, waited 0.66 s on kernel compiles
where its control waited none (``benchmarks/runs/compile_profile_h200/llama_decode_order2_phases.txt``).
With caches of its own every mode compiles every Triton kernel, as a fresh process does, and the difference
to the control is the mode's own work. Inductor's compile workers take the two cache variables with each
kernel they compile, so switching them between compiles reaches them. C++ kernels of the CPU leave their
name out of the source; Inductor's in-memory cache of them is kept.
"""

from __future__ import annotations

import contextlib
import os

from torchgen_ah.datagen.fresh_caches import compile_caches_in

ROW_FIELD = "kernel_caches"  # the one-process row's field saying how its modes met each other's kernels
PER_MODE = "per_mode"


@contextlib.contextmanager
def own_kernel_caches(folder: str):
    """Compile into ``folder`` for the block: Inductor's cache there and Triton's under it, the in-memory
    table of compiled Triton kernels emptied first; the variables as they were afterwards."""
    from ah_plugin.inductor import compile_tools  # the compiling process only (the zoo's report imports torch nowhere)

    os.makedirs(folder, exist_ok=True)
    with compile_caches_in(folder):
        compile_tools.forget_compiled_kernels()
        yield folder


def mode_folder(root: str, index: int, mode: str) -> str:
    """The caches of the ``index``-th mode compiled in the process, under ``root``."""
    return os.path.join(root, f"mode{index}_{mode}")
