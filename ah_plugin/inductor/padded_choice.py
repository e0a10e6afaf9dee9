"""Quality mode's padded candidate: cuBLAS on the GEMM padded to aligned sizes, timed with the others.

Inductor's ``pad_mm`` pass decides padding before lowering, from a benchmark of cuBLAS padded against
cuBLAS as it is; the templates take no part, and on an H200 the same program was padded in one run and not
in the next (docs/fast_mode.md, "Shape padding"). Here padding is one more candidate of an mm's autotuning:
a subgraph (Inductor's ``SubgraphTemplate``, the mechanism of its decompose-K candidate) that pads both
operands to the alignment the pass would use, multiplies, and copies the ``[:m, :n]`` corner out as a
contiguous result. It is timed like the other candidates (by CUDA-graph replay on a GPU) and, like any
non-aten candidate, must beat aten by the aten margin. When it wins, the compiled graph calls its graph as
a subgraph (the padding copies, cuBLAS on the padded operands, the copy out; the copy cannot fuse into the
mm's consumer), so the generated code needs nothing of the plugin to run. While the candidate is offered for an mm, the pad_mm pass leaves that mm
alone (``patches/pad_mm.py``).

Offered in quality mode when switched on (``AH_PLUGIN_PADDED_CHOICE``: "off", the default, since on an H200
it measured slower than letting the pass pad before autotuning (docs/quality_mode.md); "auto" on CUDA;
"on" on any device) for an mm with static sizes, a 2-byte or 4-byte float dtype, a fixed row-major result
and something to pad, in a compile that autotunes GEMMs with the Python wrapper (``autotuning_gemms``). Not
covered: two mms that Inductor later fuses as ``mm_plus_mm`` get no candidate, yet the pass is told to leave
them unpadded.
The candidate's id is ``choice_ids.PADDED_CHOICE_ID``; quality mode keeps it whenever it is offered
(``ranking.choose``), since no packaged ranking was trained with it.

Checked on torch 2.11 and 2.13: ``SubgraphTemplate.generate(name, input_nodes, layout, make_fx_graph,
description)``, ``KernelTemplateChoice(template, params, extra_kwargs, layout, inputs)``,
``DictKernelTemplateParams``, ``pad_mm.get_alignment_size_dtype`` and ``get_padded_length``.
"""

from __future__ import annotations

import functools

import sympy
import torch
from torch._inductor.codegen.subgraph import SubgraphTemplate
from torch._inductor.fx_passes import pad_mm as pad_mm_pass
from torch._inductor.ir import FixedLayout
from torch._inductor.kernel_template_choice import KernelTemplateChoice

from ..report.messages import warn_once
from ..use import choice_ids

TEMPLATE_NAME = choice_ids.PADDED_CHOICE_NAME
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _static(expr) -> int | None:
    """An integer size or stride, or None for a symbolic one (padding is decided for static sizes only)."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, sympy.Integer):
        return int(expr)
    return None


def autotuning_gemms() -> bool:
    """This compile autotunes GEMMs (max-autotune) with Inductor's Python wrapper and without pipelined
    autotuning: only then is the candidate offered, and only then may the pass be told to leave an mm to it.
    Inductor offers its own subgraph candidates under the same conditions: a subgraph's module is Python
    (the C++ wrapper and AOT compiles cannot run it), and torch 2.11's pipelined autotuning refuses
    subgraph candidates. Without max-autotune an mm's result may be written straight into a consumer's
    buffer (a ``cat``), which a subgraph candidate never writes."""
    from torch._inductor import config as inductor_config
    from torch._inductor.virtualized import V

    if not (inductor_config.max_autotune or inductor_config.max_autotune_gemm) or inductor_config.cpp_wrapper \
            or getattr(inductor_config, "fx_wrapper", False) or inductor_config.force_shape_pad:
        return False
    try:
        if V.aot_compilation:
            return False
        graph = V.graph
        if getattr(graph, "cpp_wrapper", False) or getattr(graph, "aot_mode", False):
            return False
    except Exception:  # no graph handler yet (the pad pass runs before lowering): the config decides
        pass
    try:
        from torch._inductor.autotune_process import use_pipelined_autotuning
    except ImportError:  # a torch without pipelined autotuning
        return True
    return not use_pipelined_autotuning()


def padded_sizes(m: int, k: int, n: int, dtype) -> tuple[int, int, int] | None:
    """(m, k, n) padded as the pad_mm pass pads them (each up to the dtype's alignment); None when all are
    aligned already or the dtype is not one the candidate is offered for."""
    if dtype not in _DTYPES:
        return None
    align = pad_mm_pass.get_alignment_size_dtype(dtype)
    if align <= 0:
        return None
    padded = tuple(d + pad_mm_pass.get_padded_length(d, align) for d in (m, k, n))
    return None if padded == (m, k, n) else padded


def padded_mm(a, b, *, sizes: tuple[int, int, int], padded: tuple[int, int, int]):
    """``a @ b`` computed on zero-padded operands; the ``[:m, :n]`` corner, contiguous. An operand whose sizes
    are aligned already is used as it is (a pad of nothing would still copy it)."""
    (m, k, n), (mp, kp, np_) = sizes, padded
    if (mp, kp) != (m, k):
        a = torch.nn.functional.pad(a, (0, kp - k, 0, mp - m))
    if (kp, np_) != (k, n):
        b = torch.nn.functional.pad(b, (0, np_ - n, 0, kp - k))
    return torch.mm(a, b)[:m, :n].contiguous()


class PaddedMMTemplate(SubgraphTemplate):
    """The padded GEMM as a subgraph candidate of one mm."""

    def __init__(self):
        super().__init__(name=TEMPLATE_NAME)

    def generate(self, input_nodes, layout, **kwargs):  # type: ignore[override]
        """The candidate, or ``NotImplementedError`` (Inductor then leaves it out) where it does not apply
        or cannot be built: never an error that would fail the user's compile."""
        plan = _plan(input_nodes, layout, fixed=True)
        if plan is None:
            raise NotImplementedError("nothing to pad, sizes that are not static, or a layout not fixed")
        try:
            return self._generate(input_nodes, layout, *plan)
        except Exception as exc:
            warn_once(("padded_generate", type(exc)),
                      f"ah_plugin: padded candidate left out ({type(exc).__name__}: {exc})")
            raise NotImplementedError(str(exc)) from exc

    def _generate(self, input_nodes, layout, sizes, padded):
        from torch._dispatch.python import enable_python_dispatcher
        from torch._inductor.decomposition import select_decomp_table
        from torch.fx.experimental.proxy_tensor import make_fx

        with enable_python_dispatcher():
            fn = make_fx(functools.partial(padded_mm, sizes=sizes, padded=padded), select_decomp_table())
            return super().generate(name=f"{TEMPLATE_NAME}_{'x'.join(map(str, padded))}", input_nodes=input_nodes,
                                    layout=layout, make_fx_graph=fn,
                                    description=f"padded to {'x'.join(map(str, padded))}")


def _plan(input_nodes, layout, fixed: bool = False) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """((m, k, n), padded sizes) of an mm's two input nodes, or None where the candidate does not apply.
    ``fixed``: the result's layout must be fixed, as it is when the candidate is built. Inductor hands the
    candidates over with a flexible layout and fixes it after the plugin's hook when any candidate is not
    aten (so for this one) under max-autotune; a layout still flexible then could be changed later (written
    straight into a consumer's buffer), which the subgraph's own result would not follow."""
    if len(input_nodes) != 2 or (fixed and not isinstance(layout, FixedLayout)):
        return None
    mat1, mat2 = input_nodes
    dtype = mat1.get_dtype()
    if dtype not in _DTYPES or mat2.get_dtype() != dtype or layout.dtype != dtype:
        return None
    dims = [_static(d) for d in (*mat1.get_size(), *mat2.get_size())]
    out = [_static(d) for d in (*layout.size, *layout.stride)]
    if None in dims or None in out or len(dims) != 4 or len(out) != 4:
        return None
    m, k, k2, n = dims
    if k != k2 or out[:2] != [m, n] or out[2:] != [n, 1] or 0 in (m, k, n):
        return None  # the result is row-major [m, n]: what the subgraph's contiguous corner is
    padded = padded_sizes(m, k, n, dtype)
    return None if padded is None else ((m, k, n), padded)


_TEMPLATE = PaddedMMTemplate()


def in_padded_graph() -> bool:
    """Whether Inductor is lowering the padded candidate's own graph now (its inner, padded mm), where no
    second padded candidate is offered and nothing about the outer mm is said again."""
    try:
        from torch._inductor.virtualized import V

        name = getattr(V.graph, "name", None)
    except Exception:  # no graph handler set
        return False
    return isinstance(name, str) and TEMPLATE_NAME in name


def padded_ktc(ktcs, kernel_inputs):
    """The padded candidate for one mm's autotuning (None where it does not apply), as a
    KernelTemplateChoice beside Inductor's own (``ktcs``: their layout is the mm's result)."""
    if not ktcs or kernel_inputs.device_type is None or not autotuning_gemms():
        return None
    layout = ktcs[0].layout
    if _plan(kernel_inputs.nodes(), layout) is None:
        return None
    return KernelTemplateChoice(_TEMPLATE, _template_params()({}), {}, layout, kernel_inputs)


def _template_params():
    """Inductor's ``DictKernelTemplateParams``, where this torch keeps it (the contract's ``template_params``)."""
    try:  # torch 2.14 moved the template heuristics (the old module a shim that says it will be removed)
        from torch._inductor.heuristics.template.params import DictKernelTemplateParams
    except ImportError:  # torch 2.11 and 2.13
        from torch._inductor.template_heuristics.params import DictKernelTemplateParams
    return DictKernelTemplateParams
