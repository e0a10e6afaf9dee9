"""The wider mm search space: which exhaustive Triton configs a device can run, and the per-input sample.

Pure Python on plain config kwargs (the hook gets them from Inductor's exhaustive list). Why: default
max-autotune's own list is already within ~0.5% of its best, so better kernels
must come from configs default never tries; Inductor's EXHAUSTIVE list does not filter by what the
device can run (one of upstream's extra configs needs 262144 bytes of shared memory on a 232448-byte
Hopper and fails in every autotuning).

* ``fits_device``: shared memory of the software pipeline, ``num_stages * (BLOCK_M*BLOCK_K +
  BLOCK_K*BLOCK_N) * dtype size``, within the device's per-block limit; and a register-pressure bound:
  the fp32 accumulator per thread, ``BLOCK_M*BLOCK_N / (32*num_warps)``, at most 128 of the 255
  registers a thread may hold (beyond that Triton spills and such configs never win).
* ``sample``: in collect mode, ``n`` of the fitting configs per input, chosen by a RNG seeded from the
  input's features, so the same input always gets the same sample and different inputs cover the
  space between them.
"""

from __future__ import annotations

import hashlib
import random

MAX_ACC_REGISTERS_PER_THREAD = 128
THREADS_PER_WARP = 32


def pipeline_shared_memory(params: dict, dtype_size: int) -> int:
    """Bytes of shared memory the pipelined A and B tiles need."""
    bm, bn, bk = int(params["BLOCK_M"]), int(params["BLOCK_N"]), int(params["BLOCK_K"])
    stages = max(int(params.get("num_stages", 1)), 1)
    return stages * (bm * bk + bk * bn) * int(dtype_size)


def accumulator_registers(params: dict) -> float:
    """fp32 accumulator registers per thread."""
    threads = THREADS_PER_WARP * max(int(params.get("num_warps", 4)), 1)
    return int(params["BLOCK_M"]) * int(params["BLOCK_N"]) / threads


def fits_device(params: dict, dtype_size: int, shared_memory: int) -> bool:
    """True when the config can run here (shared memory unknown, i.e. 0: only the register bound)."""
    if shared_memory and pipeline_shared_memory(params, dtype_size) > shared_memory:
        return False
    return accumulator_registers(params) <= MAX_ACC_REGISTERS_PER_THREAD


def sample(ids: list[str], n: int, input_features: dict) -> list[str]:
    """``n`` of ``ids`` (all when fewer), deterministic for the input's features."""
    ids = sorted(ids)
    if n <= 0:
        return []
    if n >= len(ids):
        return ids
    key = ",".join(f"{k}={input_features[k]}" for k in sorted(input_features))
    seed = int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "big")
    return sorted(random.Random(seed).sample(ids, n))
