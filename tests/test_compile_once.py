"""Compile-once (ah_plugin/inductor/patches/compile_once.py) on the texts Inductor generated on an H200.

The two files under tests/data/compile_once are one template of 128x768x2 as torch 2.11 rendered it: the
benchmark module the autotuning compiled (``triton_mm``) and the compiled graph's own kernel file
(``triton_tem_fused_mm_0``). The GPU test in test_fast_gpu.py checks the binaries of a real compile;
these check the text handling with Inductor's real code buffers, and Triton's cache key where Triton is
installed.
"""

from __future__ import annotations

import importlib.util
import os
import types

import pytest

pytest.importorskip("torch")

from ah_plugin.inductor.patches import compile_once  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "compile_once")
BENCHMARK = open(os.path.join(DATA, "benchmark_module.py.txt"), encoding="utf-8", newline="").read()
GRAPH = open(os.path.join(DATA, "graph_kernel.py.txt"), encoding="utf-8", newline="").read()
GRAPH_NAME = "triton_tem_fused_mm_0"


@pytest.fixture()
def remembered(tmp_path):
    """The benchmark module on disk, remembered as the preprocessing hook remembers a kept candidate."""
    path = tmp_path / "benchmark_module.py"
    path.write_text(BENCHMARK, encoding="utf-8", newline="")
    caller = types.SimpleNamespace(bmreq=types.SimpleNamespace(module_path=str(path), kernel_name="triton_mm"),
                                   make_kernel_render=None)  # the attributes Inductor's TritonTemplateCaller has
    compile_once._pending.clear()
    compile_once._index.clear()
    compile_once.remember([caller])
    yield path
    compile_once._pending.clear()
    compile_once._index.clear()


def test_the_graphs_kernel_and_its_benchmark_module_differ_only_in_what_does_not_change_the_code():
    assert BENCHMARK != GRAPH
    assert compile_once.normal_form(BENCHMARK, "triton_mm") == compile_once.normal_form(GRAPH, GRAPH_NAME)
    other_tile = GRAPH.replace("BLOCK_M : tl.constexpr = 32", "BLOCK_M : tl.constexpr = 64")
    assert compile_once.normal_form(other_tile, GRAPH_NAME) != compile_once.normal_form(BENCHMARK, "triton_mm")
    assert compile_once.normal_form(GRAPH, "triton_mm") is None  # no such function


def test_the_graph_gets_the_benchmark_modules_source_under_its_own_reported_name(remembered):
    found = compile_once.benchmarked_source(GRAPH, GRAPH_NAME, GRAPH_NAME)
    assert found is not None
    source, name, path = found
    assert name == "triton_mm" and path == str(remembered)
    assert source == BENCHMARK.replace("'kernel_name': 'Placeholder.DESCRIPTIVE_NAME'",
                                       f"'kernel_name': '{GRAPH_NAME}'")
    # a graph kernel with other code is left to Inductor
    changed = GRAPH.replace("acc += tl.dot(", "acc -= tl.dot(")
    assert compile_once.benchmarked_source(changed, GRAPH_NAME, GRAPH_NAME) is None


def test_the_literal_survives_inductors_wrapper_buffers_where_a_plain_one_does_not():
    """Inductor's wrapper formats a kernel definition and splices it into its code buffer, which empties
    whitespace-only lines: the benchmark module's text (and so Triton's cache key) survives only escaped."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.utils import IndentedBuffer

    def through_wrapper(literal_text: str) -> str:
        body = f"async_compile.triton('triton_mm', {literal_text}, device_str='cuda')"
        code = IndentedBuffer()
        code.splice(PythonWrapperCodegen._format_kernel_definition(GRAPH_NAME, body, metadata="# kernel path: x"))
        seen = {}
        fake_async_compile = types.SimpleNamespace(triton=lambda name, src, device_str: seen.update(src=src))
        exec(code.getvalue(), {"async_compile": fake_async_compile})  # noqa: S102 - the wrapper's own text
        return seen["src"]

    assert any(line and not line.strip() for line in BENCHMARK.split("\n"))  # it has whitespace-only lines
    assert through_wrapper(compile_once.literal(BENCHMARK)) == BENCHMARK
    assert through_wrapper("'''" + BENCHMARK + "'''") != BENCHMARK


def _jit_key(text: str, tag: str, tmp_path) -> str:
    path = tmp_path / f"kernel_{tag}.py"
    path.write_text(text, encoding="utf-8", newline="")
    spec = importlib.util.spec_from_file_location(f"kernel_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name = "triton_mm" if hasattr(module, "triton_mm") else GRAPH_NAME
    return getattr(module, name).fn.cache_key


def test_triton_keys_the_reused_source_as_the_benchmark_module(remembered, tmp_path):
    pytest.importorskip("triton", reason="Triton is not installed (the CPU build of torch has none): "
                                         "its cache key cannot be computed here")
    source = compile_once.benchmarked_source(GRAPH, GRAPH_NAME, GRAPH_NAME)[0]
    benchmark_key = _jit_key(BENCHMARK, "benchmark", tmp_path)
    assert _jit_key(source, "reused", tmp_path) == benchmark_key
    assert _jit_key(GRAPH, "graph", tmp_path) != benchmark_key  # why Inductor compiled it a second time


class _RecordingWrapper:
    """Stands in for Inductor's Python wrapper codegen: records the kernel definitions it is given."""

    def __init__(self):
        self.defined = []

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        self.defined.append((kernel_name, kernel_body, metadata))


class _Graph:
    """The attributes of Inductor's GraphLowering the hook reads."""

    cpp_wrapper = fx_wrapper = aot_mode = False

    def get_current_device_or_throw(self):
        import torch

        return torch.device("cuda", 0)


def test_the_installed_hook_emits_the_benchmark_source_only_where_it_may(remembered, monkeypatch):
    """Inductor's real ``TritonScheduling._emit_kernel_to_wrapper``, wrapped: the benchmark module's source
    while the plugin acts on a Python-wrapper graph, Inductor's own emission otherwise (plugin not acting,
    C++ wrapper), and the original method back after ``uninstall``."""
    import torch._inductor.config as inductor_config
    from torch._inductor import select_algorithm
    from torch._inductor.codegen.triton import TritonScheduling
    from torch._inductor.virtualized import V

    from ah_plugin.inductor import plans

    was_installed = "emit" in compile_once._saved
    compile_once.uninstall()
    original = TritonScheduling._emit_kernel_to_wrapper
    state = {"acting": True}
    monkeypatch.setattr(plans, "acting", lambda: state["acting"])
    monkeypatch.setattr(plans, "compile_once", lambda: True)
    compile_once.install()
    kernel = select_algorithm.TritonTemplateKernel.__new__(select_algorithm.TritonTemplateKernel)
    graph = _Graph()

    def emit():
        wrapper = _RecordingWrapper()
        with V.set_graph_handler(graph), inductor_config.patch(compile_threads=1):
            TritonScheduling._emit_kernel_to_wrapper(None, wrapper, kernel, GRAPH, GRAPH_NAME, GRAPH_NAME, [],
                                                     "/cache/graph_kernel.py", lambda nodes, w: ("# o", "# d"))
        [(name, body, metadata)] = wrapper.defined
        assert name == GRAPH_NAME
        seen = {}
        recorder = types.SimpleNamespace(
            triton=lambda kernel_name, src, device_str: seen.update(name=kernel_name, src=src, device=device_str))
        exec(f"kernel = {body}", {"async_compile": recorder})  # noqa: S102 - the wrapper's own line
        return seen, metadata

    try:
        before = dict(compile_once.counts)
        seen, metadata = emit()
        assert seen["name"] == "triton_mm" and seen["device"] == "cuda"
        assert seen["src"] == BENCHMARK.replace("'Placeholder.DESCRIPTIVE_NAME'", f"'{GRAPH_NAME}'")
        assert str(remembered) in metadata and compile_once.counts["reused"] == before["reused"] + 1
        state["acting"] = False
        seen, metadata = emit()
        assert seen["name"] == GRAPH_NAME and "/cache/graph_kernel.py" in metadata  # Inductor's own
        state["acting"] = True
        graph.cpp_wrapper = True
        assert emit()[0]["name"] == GRAPH_NAME
    finally:
        compile_once.uninstall()
        assert TritonScheduling._emit_kernel_to_wrapper is original
        monkeypatch.undo()
        if was_installed:
            compile_once.install()
