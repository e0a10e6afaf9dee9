"""Each mode of a shared process compiles its kernels in caches of its own (``own_kernel_caches``): real
Inductor compiles on the CPU inside the blocks write their code under each block's folder, not the process's
caches, the same function compiled in a second block compiles its kernel there again instead of taking the
first block's, and the cache variables are as they were afterwards."""

from __future__ import annotations

import os

import torch

from torchgen_ah.evaluation import own_kernel_caches


def _files_under(folder) -> set:
    return {os.path.join(d, f) for d, _, files in os.walk(folder) for f in files}


def _compile_and_run():
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.sin(x) * 3 + 1, options={"fx_graph_cache": False})
    x = torch.randn(64)
    torch.testing.assert_close(fn(x), torch.sin(x) * 3 + 1)


def test_each_block_compiles_its_kernels_into_its_own_folder_and_the_variables_come_back(tmp_path, monkeypatch):
    outer = tmp_path / "process"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(outer))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    folders = [own_kernel_caches.mode_folder(str(tmp_path / "modes"), index, mode)
               for index, mode in enumerate(("off", "off_again"))]
    assert len(set(folders)) == 2 and os.path.basename(folders[0]).startswith("mode0_off_")
    for folder in folders:
        with own_kernel_caches.own_kernel_caches(folder) as caches:
            assert caches == own_kernel_caches.PER_MODE  # Inductor's in-process caches emptied
            assert os.environ["TRITON_CACHE_DIR"] == os.path.join(folder, "triton")
            _compile_and_run()
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(outer) and "TRITON_CACHE_DIR" not in os.environ
    first, second = (_files_under(folder) for folder in folders)
    # the same kernel compiled again in the second folder (C++ on the CPU: its shared library), not reused
    assert any(path.endswith(".so") for path in first) and any(path.endswith(".so") for path in second), second
    assert not any(path.endswith((".py", ".so")) for path in _files_under(outer))
    assert own_kernel_caches.triton_binaries(folders[0]) == 0  # no GPU binaries on the CPU
