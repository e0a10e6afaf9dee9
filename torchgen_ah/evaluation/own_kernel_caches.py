"""Each mode of a shared process compiles its kernels cold, in Inductor and Triton caches of its own.

Inductor names each Triton kernel of a graph with a running number (``triton_poi_fused_add_7``), and the
name is part of the kernel's source, by which Inductor's and Triton's caches key it. A mode that adds kernels
(a GEMM kept on a Triton template where max-autotune off calls cuBLAS) renumbers every kernel of the graph
after them, so in a process where off compiled first that mode recompiles kernels that a control with off's
code finds compiled. An estimate of the mode's compile over the control's (``zoo_one_process``) then charged
the mode for kernels off's own fresh compile paid too: on the H200, the Llama-style decoder at decode, whose
fast mode kept two templates (the first early in the graph) beside off's ten other kernels, waited 0.66 s on
kernel compiles where its control waited none, in one of two orders
(``benchmarks/runs/compile_profile_h200/llama_decode_order2_phases.txt``; 0.30 s more in the other).
With caches of its own every mode compiles every kernel into cold caches, as off's first compile did, in a
process already warm (its compile workers up): the difference to the control is the mode's own work.
Inductor's compile workers take the two cache variables with each kernel they compile, and the in-process
caches Inductor empties for its own fresh-cache context are emptied per mode
(``compile_tools.forget_compiled_code``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from torchgen_ah.datagen.fresh_caches import compile_caches_in

ROW_FIELD = "kernel_caches"  # the one-process row's field saying how its modes met each other's kernels
PER_MODE = "per_mode"  # each mode's own folders, Inductor's in-process caches emptied before each
FOLDERS_ONLY = "folders_only"  # each mode's own folders, the in-process caches kept (no registry on this torch)


@contextlib.contextmanager
def own_kernel_caches(folder: str):
    """Compile into ``folder`` for the block: Inductor's cache there and Triton's under it, Inductor's
    in-process caches emptied first; the variables as they were afterwards. Yields ``PER_MODE``, or
    ``FOLDERS_ONLY`` where this torch could not empty them."""
    from ah_plugin.inductor import compile_tools  # the compiling process only (the zoo's report imports torch nowhere)

    os.makedirs(folder, exist_ok=True)
    with compile_caches_in(folder):
        yield PER_MODE if compile_tools.forget_compiled_code() else FOLDERS_ONLY


def mode_folder(root: str, index: int, mode: str) -> str:
    """A new, empty folder for the caches of the ``index``-th mode compiled in the process, under ``root``."""
    os.makedirs(root, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"mode{index}_{mode}_", dir=root)


def triton_binaries(folder: str) -> int:
    """How many GPU binaries Triton compiled into ``folder``'s cache (0 on the CPU)."""
    found = 0
    for _, _, files in os.walk(os.path.join(folder, "triton")):
        found += sum(name.endswith((".cubin", ".hsaco")) for name in files)
    return found
