"""``AutotuneRequest``: one autotuning as the parts that decide see it (heuristic, results cache, collector).

`ah_plugin.inductor` is the only package that touches Inductor internals. It turns each autotuning into an
`AutotuneRequest` made of plain data (operation name, the log's feature columns, candidate choice ids),
asks the registered policies which candidates to keep, and reports measured timings back. Policies never
see Inductor objects, so they can be tested on plain data and survive Inductor refactors.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
        "post_codegen" (ChoiceCaller list, at the selector call; the CPU path only reaches this one).
    tensors: shapes/strides/dtypes of the inputs as plain data (for rebuilding the input offline).
    context: what the op's lowering knows beyond its inputs, for keys that need it (FlexAttention: the
        block mask's block sizes and a digest of the score and mask functions, ``tunable.flex_params``);
        empty for a GEMM.
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
    context: dict[str, object] = field(default_factory=dict)
