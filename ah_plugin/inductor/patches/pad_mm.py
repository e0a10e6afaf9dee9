"""Shape padding (Inductor's ``pad_mm`` pass) decided with replay timing, and recorded/replayed.

The pass pads an mm, addmm or bmm whose sizes are not aligned when a quick benchmark finds the padded
product faster (by 1.1x). That benchmark times each variant call by call (``get_do_bench``), and the
decision flips between runs of one program: on an H200, 4097x4097x511 bf16 replays in 48 us padded
and 116-125 us unpadded, yet two runs chose differently, and a results-cache hit run then missed the
padded shape's key and re-tuned it. While the plugin is on:

* ``get_do_bench`` returns the plugin's CUDA-graph replay timing when that is the timing method
  (``AH_PLUGIN_TIMING``), so the decision rests on the times a compiled model sees;
* ``should_pad`` first asks the policies for a recorded decision (``padding_decision(request)``: the
  results cache answers from a ``pad_mm``/``pad_addmm``/``pad_bmm`` row), then, for an mm or addmm, for
  an opinion from what they would keep on the GEMM as it is and padded (``padding_opinion(unpadded,
  padded)``: fast mode leaves a GEMM unpadded where a template is ranked first either way), and after a
  benchmarked decision tells them (``on_padding_decision(request, pad, time_ms)``) so the cache records
  it. A recorded decision takes the place of the pass's benchmark only: it applies where the pass says the
  input *can* be padded, and not in a compile whose settings make the pass decide without benchmarking
  (forced padding, deterministic mode, the bf16 padding rule).

The times the pass measured reach the policies through the decision's session (``session.Padding``).
Checked on torch 2.11, 2.13, 2.14 and 2.15 (``pad_mm.should_pad(match, mat1, mat2, op, input=None)``, ``can_pad``,
``get_do_bench()``, ``is_padded_faster(key, ori_time, pad_time)``, all called through module globals).
"""

from __future__ import annotations

import torch
from torch._inductor import config as inductor_config
from torch._inductor.fx_passes import pad_mm as pad_mm_pass

from ...policy import AutotuneRequest, PolicyChain
from ...report.messages import warn_once
from ...report.verbose_output import verbose
from .. import contract, plans
from ..session import Padding, innermost, opened
from ...replay_timing import METHOD_REPLAY
from ..graph_trees import replay_time_ms  # captures on the CUDA-graph trees' stream
from ..padded_choice import autotuning_gemms, padded_sizes
from ..requests import described_request, tf32_enabled

PAD_OPS = {"mm": "pad_mm", "addmm": "pad_addmm", "bmm": "pad_bmm"}
NAMES = ("should_pad", "get_do_bench", "is_padded_faster")  # replaced; can_pad and the size helpers are read

_saved: dict = {}


def _op_name(op) -> str | None:
    for name in PAD_OPS:
        if op is getattr(torch.ops.aten, name):
            return name
    return None


def _static(*tensors) -> bool:
    """Every size and stride a plain integer: ``int()`` of a symbolic one would specialize the graph on it
    (a guard, a recompile for the next size), and the pass does not pad symbolic sizes."""
    return all(not isinstance(v, torch.SymInt) for t in tensors if t is not None
               for v in (*t.shape, *t.stride()))


def _describe(tensor) -> dict:
    return {"size": [int(s) for s in tensor.shape], "stride": [int(s) for s in tensor.stride()],
            "dtype": str(tensor.dtype)}


def padding_request(op, mat1, mat2, input=None) -> AutotuneRequest | None:
    """The plain-data request of one padding decision (None for an op the pass does not pad)."""
    name = _op_name(op)
    if name is None or not _static(input, mat1, mat2):
        return None
    tensors = [_describe(t) for t in ((input, mat1, mat2) if name == "addmm" else (mat1, mat2))]
    tf32 = mat1.dtype == torch.float32 and tf32_enabled()
    return AutotuneRequest(op_name=PAD_OPS[name], features={"using_tf32": str(bool(tf32))},
                           metadata={"name": PAD_OPS[name]}, candidates=["pad", "no_pad"],
                           stage="padding", tensors=tensors)


def padded_descriptions(op, mat1, mat2, input=None) -> tuple[list[dict], list[dict]] | None:
    """(as it is, padded) descriptions of an mm's or addmm's operands (addmm: bias first), padded as the
    pass pads them: each dimension up to its dtype's alignment, the padded copies row-major, the bias only
    along its dimensions that are not 1 (it broadcasts). None for bmm, symbolic sizes, or nothing to pad."""
    name = _op_name(op)
    if name not in ("mm", "addmm") or mat1.dim() != 2 or mat2.dim() != 2 or \
            (name == "addmm" and input is None) or not _static(input, mat1, mat2):
        return None
    (m, k), n = (int(s) for s in mat1.shape), int(mat2.shape[1])
    described = [_describe(t) for t in ((input, mat1, mat2) if name == "addmm" else (mat1, mat2))]
    align1, align2 = pad_mm_pass.get_alignment_size(mat1), pad_mm_pass.get_alignment_size(mat2)
    mp = m + pad_mm_pass.get_padded_length(m, align1)
    kp = k + pad_mm_pass.get_padded_length(k, align1)
    np_ = n + pad_mm_pass.get_padded_length(n, align2)
    if (mp, kp, np_) == (m, k, n):
        return None
    padded = [{"size": [mp, kp], "stride": [kp, 1], "dtype": str(mat1.dtype)},
              {"size": [kp, np_], "stride": [np_, 1], "dtype": str(mat2.dtype)}]
    if name == "addmm":
        padded.insert(0, _padded_bias(described[0], mp, np_))
    return described, padded


def _padded_bias(bias: dict, mp: int, np_: int) -> dict:
    """The bias as ``pad_addmm`` leaves it: a dimension of size 1 broadcasts and is not padded; a padded
    bias is a new row-major tensor; one that needs no padding keeps its layout."""
    size, stride = list(bias["size"]), list(bias["stride"])
    targets = {1: [np_], 2: [mp, np_]}.get(len(size))
    if targets is None:
        return dict(bias)
    new_size = [t if s != 1 else s for s, t in zip(size, targets)]
    if new_size == size:
        return dict(bias)
    new_stride = [new_size[1], 1] if len(new_size) == 2 else [1]
    return {"size": new_size, "stride": new_stride, "dtype": bias["dtype"]}


def _templates_possible() -> bool:
    """This compile can run a Triton template for a GEMM (max-autotune with the Triton backend) and the
    user did not force padding: only then may fast mode leave a GEMM unpadded for a template."""
    backends = {b.strip().upper() for b in str(inductor_config.max_autotune_gemm_backends).split(",")}
    return bool(inductor_config.max_autotune or inductor_config.max_autotune_gemm) and "TRITON" in backends \
        and not inductor_config.force_shape_pad


def _opinion(op, mat1, mat2, input=None) -> bool | None:
    """The first policy's ``padding_opinion`` on this GEMM as it is and padded, or None (also where the pass
    could not pad it, or this compile runs no template)."""
    if not _templates_possible():
        return None
    pair = padded_descriptions(op, mat1, mat2, input)
    if pair is None or not pad_mm_pass.can_pad(mat1, mat2, op, input):
        return None
    name = _op_name(op)
    unpadded, padded = (described_request(name, tensors, mat1.device, [], "padding") for tensors in pair)
    return PolicyChain.for_op(name).padding_opinion(unpadded, padded)


def _padded_candidate_offered(op, mat1, mat2) -> bool:
    """Quality mode times this mm padded as one of its candidates (``inductor/padded_choice.py``), so the
    pass must not pad it first: max-autotune is on, the settings offer the candidate on this device, and the
    sizes are static and unaligned."""
    if _op_name(op) != "mm" or not autotuning_gemms():
        return False
    current = plans.current_settings()
    if current is None or not current.offers_padded(mat1.device.type) or not _static(mat1, mat2):
        return False
    (m, k), n = (int(s) for s in mat1.shape), int(mat2.shape[1])
    return padded_sizes(m, k, n, mat1.dtype) is not None


def _pass_decides_alone() -> bool:
    """The pass decides this compile's padding without its benchmark (forced padding, deterministic mode,
    the bf16 padding rule): a recorded decision must not take the place of those checks."""
    return bool(inductor_config.force_shape_pad or getattr(inductor_config, "deterministic", False)
                or "pad_aten_mm_pass" in (getattr(inductor_config, "post_grad_fusion_options", None) or {}))


def _should_pad(match, mat1, mat2, op, input=None):
    original = _saved["should_pad"]
    if not plans.acting():
        return original(match, mat1, mat2, op, input)
    contract.note("pad_mm")
    try:
        if _padded_candidate_offered(op, mat1, mat2):
            verbose("mm: padding left to quality mode's padded candidate")
            return False
    except Exception as exc:  # describing fake tensors must never break the pass
        warn_once(("pad_candidate", type(exc)), f"ah_plugin: padded candidate not checked ({exc!r})")
    try:
        request = padding_request(op, mat1, mat2, input)
        recorded = PolicyChain.for_op(request.op_name).padding_decision(request) \
            if request is not None and not _pass_decides_alone() else None
    except Exception as exc:  # describing fake tensors must never break the pass
        warn_once(("pad_request", type(exc)), f"ah_plugin: padding decision not looked up ({exc!r})")
        request, recorded = None, None
    try:
        opinion = _opinion(op, mat1, mat2, input) if recorded is None else None
    except Exception as exc:  # an opinion is optional: never break the pass for it
        warn_once(("pad_opinion", type(exc)), f"ah_plugin: no padding opinion asked ({exc!r})")
        opinion = None
    if recorded is not None and pad_mm_pass.can_pad(mat1, mat2, op, input):
        verbose(f"{request.op_name}: recorded decision {'pad' if recorded else 'no pad'}")
        return recorded
    if opinion is not None:  # asked only where the pass can pad
        return opinion
    with opened(Padding()) as padding:
        decision = original(match, mat1, mat2, op, input)
    if request is not None and padding.times:
        ori_time, pad_time = padding.times[-1]
        PolicyChain.for_op(request.op_name).tell(
            "on_padding_decision",
            lambda p: p.on_padding_decision(request, bool(decision), pad_time if decision else ori_time))
    return decision


def _get_do_bench():
    if plans.acting() and plans.timing() == METHOD_REPLAY:
        return replay_time_ms
    return _saved["get_do_bench"]()


def _is_padded_faster(key, ori_time, pad_time):
    padding = innermost(Padding)
    if padding is not None:
        padding.times.append((float(ori_time), float(pad_time)))
    return _saved["is_padded_faster"](key, ori_time, pad_time)


def install() -> None:
    """Wrap the pass's functions; they act while the plugin acts (``plans.acting()``)."""
    replacements = {"should_pad": _should_pad, "get_do_bench": _get_do_bench,
                    "is_padded_faster": _is_padded_faster}
    for name in NAMES:
        if name in _saved:
            continue
        _saved[name] = getattr(pad_mm_pass, name)
        setattr(pad_mm_pass, name, replacements[name])


def uninstall() -> None:
    for name, fn in _saved.items():
        setattr(pad_mm_pass, name, fn)
    _saved.clear()
