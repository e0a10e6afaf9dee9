"""The modules Inductor generates, captured as they are written: what the tools compare between modes.

Inductor hands each generated module's source to ``GraphLowering.save_output_code`` when that is set; its own
helper for this resets Dynamo, which would drop whatever was compiled before in the process. The tools
(``torchgen_ah.evaluation``, the benchmarks) summarize and fingerprint what is captured here
(``torchgen_ah.evaluation.generated_code``). Checked on torch 2.11 and 2.13.
"""

from __future__ import annotations

import contextlib
from unittest import mock

from torch._inductor.graph import GraphLowering
from torch._inductor.virtualized import V

BENCHMARK_GRAPH_PREFIX = "benchmark_"  # SubgraphChoiceCaller's name for the graphs it compiles to time


@contextlib.contextmanager
def capturing_code():
    """Within the block, every module Inductor generates (autotuning candidates' graphs left out) is
    appended to the list it yields: a process's whole generated code, recompiles and backward included."""
    codes: list[str] = []

    def keep(code: str) -> None:
        if not in_benchmark_graph():
            codes.append(code)

    with mock.patch.object(GraphLowering, "save_output_code", keep):
        yield codes


def first_call_with_code(compiled, inputs) -> tuple:
    """(output, generated modules) of ``compiled``'s first call (``capturing_code`` around it): the modules of
    graphs compiled only to be benchmarked as autotuning candidates are left out, they never run in the call."""
    with capturing_code() as codes:
        out = compiled(*inputs)
    return out, codes


def in_benchmark_graph() -> bool:
    """Whether the graph Inductor is generating code for now is an autotuning candidate's (on an H200, default
    max-autotune on 64x65536x64 generated nine decompose-K benchmark modules besides the graph's own)."""
    try:
        name = getattr(V.graph, "name", None)
    except Exception:  # no graph handler set: not inside a lowering
        return False
    return isinstance(name, str) and name.startswith(BENCHMARK_GRAPH_PREFIX)
