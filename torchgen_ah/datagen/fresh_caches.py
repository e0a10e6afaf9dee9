"""A fresh Inductor and Triton cache folder for the duration of one measurement, removed afterwards.

Data generators compile every input with empty caches, so that no kernel or timing comes from an earlier
input, while the repetitions of one input may reuse what its first compile built. Inductor and Triton read
their cache folders from the environment at each use.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextlib.contextmanager
def compile_caches_in(folder: str):
    """Point both caches at ``folder`` inside the block (Triton's under it); the variables are put back
    afterwards. Yields the folder."""
    saved = {name: os.environ.get(name) for name in CACHE_VARIABLES}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    try:
        yield folder
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def fresh_compile_caches(prefix: str, root: str | None = None):
    """Point both caches at a new folder under ``root`` (the system's temporary folder by default) inside the
    block; the variables are put back and the folder removed afterwards. Yields the folder."""
    folder = tempfile.mkdtemp(prefix=prefix, dir=root)
    try:
        with compile_caches_in(folder):
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
