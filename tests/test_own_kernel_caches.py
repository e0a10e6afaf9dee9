"""Each mode of a shared process compiles its kernels in caches of its own (``own_kernel_caches``): a real
Inductor compile on the CPU inside the block writes its code under the block's folder, not the process's
caches, the in-memory table of compiled Triton kernels is emptied on entry, and the cache variables are as
they were afterwards."""

from __future__ import annotations

import os

import torch

from torchgen_ah.evaluation import own_kernel_caches


def _files_under(folder) -> set:
    return {os.path.join(d, f) for d, _, files in os.walk(folder) for f in files}


def test_a_compile_in_the_block_writes_its_code_in_the_blocks_caches_and_the_variables_come_back(tmp_path, monkeypatch):
    from torch._inductor import async_compile

    outer = tmp_path / "process"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(outer))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    async_compile.CompiledTritonKernels._cache["sentinel"] = object()  # a kernel an earlier mode compiled
    folder = own_kernel_caches.mode_folder(str(tmp_path), 1, "fast")
    torch._dynamo.reset()
    with own_kernel_caches.own_kernel_caches(folder):
        assert "sentinel" not in async_compile.CompiledTritonKernels._cache
        assert os.environ["TRITON_CACHE_DIR"] == os.path.join(folder, "triton")
        fn = torch.compile(lambda x: torch.sin(x) * 3 + 1, options={"fx_graph_cache": False})
        x = torch.randn(64)
        torch.testing.assert_close(fn(x), torch.sin(x) * 3 + 1)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(outer) and "TRITON_CACHE_DIR" not in os.environ
    written = _files_under(folder)
    assert any(path.endswith(".py") for path in written), written  # the compiled graph's code
    assert not any(path.endswith(".py") for path in _files_under(outer))
    assert os.path.basename(folder) == "mode1_fast"
