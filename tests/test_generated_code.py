"""The generated-code fingerprint: equal for the same kernels compiled in two processes with different cache
folders (the differences live in comments), different when the computation differs."""

import json
import os
import subprocess
import sys

import pytest

from torchgen_ah.evaluation.generated_code import code_fingerprint, first_difference, normalized

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import hashlib, json, sys, torch
from ah_plugin.inductor.generated_code_capture import first_call_with_code
from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary

x = torch.randn(64, 64)
for _ in range(int(sys.argv[1])):  # graphs compiled before: later graphs get other ids in their comments
    torch.compile(lambda a: a.cos() + 1)(x)
out = {}
for name, fn in (("double", lambda a: (a * 2).relu().sum(1)), ("triple", lambda a: (a * 3).relu().sum(1))):
    torch.compiler.reset()
    result, codes = first_call_with_code(torch.compile(fn), (x,))
    assert torch.allclose(result, fn(x))
    out[name] = {"fingerprint": code_fingerprint(codes), "summary": code_summary(codes),
                 "raw": hashlib.sha256("".join(codes).encode()).hexdigest()}
print("RESULT " + json.dumps(out))
"""


def _fingerprints(tmp_path, name, graphs_before):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name), TORCHINDUCTOR_FX_GRAPH_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(graphs_before)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])


@pytest.mark.slow
def test_the_same_kernels_in_two_processes_share_a_fingerprint_and_other_code_does_not(tmp_path):
    first, second = _fingerprints(tmp_path, "one", 0), _fingerprints(tmp_path, "two", 2)
    assert first["double"]["raw"] != second["double"]["raw"]  # the modules differ, in their comments only
    assert first["double"]["summary"]["kernels"] >= 1
    assert first["double"]["fingerprint"] == second["double"]["fingerprint"]
    assert first["double"]["fingerprint"] != first["triple"]["fingerprint"]


def test_comments_and_blank_lines_do_not_count_and_code_does():
    code = "# AOT ID: ['0_inference']\nimport torch\n\n\n# kernel path: /tmp/a/b.py\nk = async_compile.triton('k', '''x * 2''')\n"
    moved = code.replace("/tmp/a/b.py", "/tmp/elsewhere/c.py").replace("0_inference", "7_inference") + "\n\n"
    assert normalized(code) == "import torch\nk = async_compile.triton('k', '''x * 2''')"
    assert code_fingerprint([code]) == code_fingerprint([moved])
    assert code_fingerprint([code]) != code_fingerprint([code.replace("x * 2", "x * 3")])
    assert code_fingerprint([]) is None  # nothing generated (a graph reused): nothing to compare
    # C++ kernels' preprocessor lines are code, not comments
    cpp = "k = async_compile.cpp_pybinding(['float*'], '''\n#include <a.h>\n#pragma omp parallel\nvoid k() {}\n''')"
    assert "#pragma omp parallel" in normalized(cpp)
    assert code_fingerprint([cpp]) != code_fingerprint([cpp.replace("#pragma omp parallel\n", "")])


BENCHMARK_CHILD = r"""
import json, torch
from torch._inductor.graph import GraphLowering
from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning
from ah_plugin.inductor.generated_code_capture import first_call_with_code

@torch.library.custom_op("ahtest::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@doubled.register_fake
def _(x):
    return torch.empty_like(x)

def times_two(x):
    return x * 2

def plus_itself(x):
    return x + x

register_custom_op_autotuning(doubled, configs=[CustomOpConfig(times_two), CustomOpConfig(plus_itself)])
graphs = []
compile_to_module = GraphLowering.compile_to_module
def recording(self, *args, **kwargs):
    graphs.append(str(self.name))
    return compile_to_module(self, *args, **kwargs)
GraphLowering.compile_to_module = recording
x = torch.randn(64, 64)
fn = lambda a: doubled(a).relu()
out, codes = first_call_with_code(torch.compile(fn, mode="max-autotune-no-cudagraphs"), (x,))
assert torch.allclose(out, fn(x))
print("RESULT " + json.dumps({"graphs": graphs, "kept": len(codes), "relu": ["relu" in c or "max" in c for c in codes]}))
"""


@pytest.mark.slow
def test_a_graph_compiled_only_to_benchmark_a_candidate_is_not_kept(tmp_path):
    """Inductor compiles a graph of its own to time each decomposition of an autotuned custom op (as for
    decompose-K on a GPU), named ``benchmark_*``; those modules never run in the compiled call. A real
    compile on the CPU: the candidates' graphs are compiled, only the call's own module is kept."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_FX_GRAPH_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", BENCHMARK_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])
    benchmark_graphs = [g for g in out["graphs"] if g.startswith("benchmark_")]
    assert len(benchmark_graphs) == 2, out["graphs"]  # one per decomposition, each compiled to a module
    assert out["kept"] == len(out["graphs"]) - 2 == 1
    assert out["relu"] == [True]  # the kept module is the call's own graph, with the relu after the op


def test_summary_counts_template_kernels_apart_from_the_others():
    """A Triton GEMM template (``triton_tem_``) is what a mode kept instead of aten: the zoo reports how many,
    also where the compiled graph runs the autotuning's own benchmark kernel."""
    from torchgen_ah.evaluation.generated_code import code_summary

    code = ("triton_tem_fused_mm_0 = async_compile.triton('triton_tem_fused_mm_0', '''\n@triton.jit\n''')\n"
            "triton_poi_fused_add_1 = async_compile.triton('triton_poi_fused_add_1', '''\n@triton.jit\n''')\n"
            "extern_kernels.mm(buf0, arg1_1, out=buf1)\nextern_kernels.addmm(a, b, c, out=d)\n")
    summary = code_summary([code, "cpp_fused_0 = async_compile.cpp_pybinding(['float*'], '''void k() {}''')\n"])
    assert summary == {"graphs": 2, "kernels": 3, "templates": 1, "extern_calls": {"addmm": 1, "mm": 1}}
    # compile-once: the graph runs the autotuning's own benchmark kernel, whose function keeps its name
    reused = ("triton_tem_fused_mm_2 = async_compile.triton('triton_mm', '''\n@triton.jit\n''', "
              "device_str='cuda')\n")
    assert code_summary([reused])["templates"] == 1


def test_first_difference_shows_where_two_calls_code_differs_beyond_comments():
    off = ["# graph 1\nbuf0 = empty()\nextern_kernels.mm(a, b, out=buf0)\nreturn (buf0, )\n"]
    same = ["# graph 7, another cache path\nbuf0 = empty()\nextern_kernels.mm(a, b, out=buf0)\nreturn (buf0, )\n"]
    assert first_difference(off, same) is None  # comments only: the fingerprint's normal form
    other = [off[0].replace("out=buf0", "out=buf1")]
    diff = first_difference(off, other)
    assert "-extern_kernels.mm(a, b, out=buf0)" in diff and "+extern_kernels.mm(a, b, out=buf1)" in diff
    assert first_difference(off, off + other).startswith("--- module 1")  # a module more
    long = ["\n".join(f"x{i} = {i}" for i in range(200))]
    cut = first_difference(long, [long[0].replace("x", "y")], lines=10).splitlines()
    assert len(cut) == 11 and cut[-1].endswith("more diff lines")
