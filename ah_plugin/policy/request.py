"""The contract between the Inductor hook and the parts that decide (heuristic, results cache, collector).

`ah_plugin.inductor` is the only package that touches Inductor internals. It turns each autotuning into an
`AutotuneRequest` made of plain data (operation name, the log's feature columns, candidate choice ids),
asks the registered policies which candidates to keep, and reports measured timings back. Policies never
see Inductor objects, so they can be tested on plain data and survive Inductor refactors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class AutotuneRequest:
    """One autotuning of one operation on one input, as plain data.

    op_name: "mm", "addmm", "bmm", "packed_linear", ...
    features: the AutoHeuristic log's feature columns for this input, in log column order
        (numerical features first, then categorical), values as the log writes them.
    metadata: the log's metadata for this device and operation: "name", "device_capa" (tuple),
        "shared_memory" (int), "numerical_features", "categorical_features"; plus "device_name", and
        after benchmarking "timing": how the candidates were timed ("cudagraph_replay", "per_call", or
        "mixed" when some fell back).
    candidates: choice ids of every candidate Inductor offers, in Inductor's order, unique.
    stage: "pre_codegen" (KernelTemplateChoice list, before Triton code exists) or
        "post_codegen" (ChoiceCaller list, the preprocessing hook; the CPU path only reaches this one).
    tensors: shapes/strides/dtypes of the inputs as plain data (for rebuilding the input offline).
    variants: for an input with symbolic sizes (dynamic shapes), the same request at other sizes the
        compiled graph serves (each a request without variants); empty for a static input. ``features``
        and ``tensors`` hold the sizes Inductor autotunes at (its size hints).
    """

    op_name: str
    features: dict[str, object]
    metadata: dict[str, object]
    candidates: list[str]
    stage: str = "post_codegen"
    tensors: list[dict[str, object]] = field(default_factory=list)
    variants: list["AutotuneRequest"] = field(default_factory=list)


class ChoicePolicy(Protocol):
    """A part that narrows autotuning (cache, heuristic) or learns from it (collector)."""

    def select(self, request: AutotuneRequest) -> list[str] | None:
        """Return the candidate ids to keep (a subset of request.candidates, in any order),
        or None for no opinion. Must be cheap; must not raise (the hook guards it anyway)."""
        ...

    def on_timings(
        self,
        request: AutotuneRequest,
        timings: dict[str, float],
        untimed: list[str],
    ) -> None:
        """Called after benchmarking with every timed candidate (ms; inf for failed runs removed and
        listed in `untimed`)."""
        ...

    # Optional (the hook calls them only when a policy defines them):
    #
    # def numerical_check(self, request) -> tuple[float, float] | None:
    #     """(atol, rtol) to check every candidate's output against aten's before benchmarking
    #     (post-codegen; the results cache asks for it on a miss with tuning on); None: no check."""
    #
    # def on_numerical_check(self, request, rejected: list[str], timings: dict[str, float]) -> None:
    #     """The ids whose output differed beyond tolerance (dropped before benchmarking)."""
    #
    # def benchmark_limits(self, request) -> dict | None:
    #     """{"duration_ms": int, "iterations": int} to bound each candidate's benchmark of this
    #     autotuning (the results cache asks on a tuning miss); None: Inductor's own lengths."""
    #
    # def padding_decision(self, request) -> bool | None:
    #     """A recorded shape-padding decision for this input (request.op_name "pad_mm", "pad_addmm",
    #     "pad_bmm"; request.tensors the unpadded operands); None: let Inductor decide."""
    #
    # def padding_opinion(self, unpadded, padded) -> bool | None:
    #     """Whether to pad an mm/addmm nothing recorded a decision for, from two plain requests (op "mm" or
    #     "addmm", no candidates): the GEMM as it is and as the pass would pad it; None: let Inductor decide."""
    #
    # def on_padding_decision(self, request, pad: bool, time_ms: float) -> None:
    #     """Inductor benchmarked padding for this input and decided ``pad`` (time of the kept variant)."""
