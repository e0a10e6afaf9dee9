"""One autotuning, start to finish: the policies are asked before code generation (``pre_codegen``),
again at the selector call where the first hook could not see the candidates (``preprocess``), and told
the timings afterwards (``feedback``). What these share is the autotuning's session (``session``).

* ``pre_codegen``: every candidate of an mm/addmm/bmm as a cheap ``KernelTemplateChoice`` (no Triton
  code yet): the search space is widened, ids are put on the candidates (their ``annotations``, which
  Inductor keeps for this), and the first policy with an opinion prunes them. One kept candidate means
  Inductor benchmarks nothing; aten alone means no template is compiled either. A CPU mm that arrives with
  aten alone is not autotuned at all (``ah_plugin.report.cpu_gemm`` says once what to set instead).
* ``preprocess`` (the selector call, every autotuning, the CPU's ``packed_linear`` included): prunes what
  no pre-codegen hook saw, runs the numerical check a policy asks for, and puts the benchmark plan on the
  candidates (CUDA-graph replay timing, TunableOp limits). Where the policies keep aten alone in a GEMM
  lowering the plugin wrapped, it asks for the GEMM to be lowered again as max-autotune off lowers it.
* ``feedback`` (Inductor's feedback saver): every candidate's time goes to the policies, and the aten
  margin is applied to the timings Inductor picks its winner from (the one write into Inductor's data the
  contract's ``feedback`` row names): a template wins over aten only when it is faster by
  ``AH_PLUGIN_ATEN_MARGIN`` (``ah_plugin.use.aten_margin``). Torch 2.13's
  ``InductorChoices.override_best_choice`` is not used for this: Inductor does not call it on the
  multi-template path that max-autotune GEMMs take on the GPU (the benchmark-epilogue-fusion path),
  and torch 2.11 has no such hook; feedback savers run before the winner is taken on both paths.

Everything here is guarded: an exception warns once and the autotuning goes on as Inductor's own.
"""

from __future__ import annotations

import torch._inductor.config as inductor_config

from ..config import settings
from ..policy import AutotuneRequest, PolicyChain
from ..replay_timing import METHOD_REPLAY
from ..report import cpu_gemm, decision_words
from ..report.messages import warn_once
from ..report.verbose_output import verbose
from ..use import aten_margin
from ..use.flex_ranking import FLEX_OPS
from ..use.ranking import is_aten_choice
from . import numerical_check, padded_choice, plans, session, wide_space
from .patches import benchmarker, compile_once
from .requests import build_request, caller_ids, ktc_ids

ID_ANNOTATION = "ah_plugin_id"


def timing_method(device_type: str, current) -> str | None:
    """How this autotuning's candidates are timed: replay on CUDA when asked for (and the candidates are
    benchmarked in this process), else Inductor's own (None)."""
    if current is None or current.timing != METHOD_REPLAY or device_type != "cuda":
        return None
    if getattr(inductor_config, "autotune_in_subproc", False):
        warn_once("subproc", "ah_plugin: TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC=1 benchmarks Triton candidates in "
                             "a subprocess; they are timed per call there, not by CUDA-graph replay")
        return None
    return METHOD_REPLAY


def select(request: AutotuneRequest, current, chain: PolicyChain) -> list[str] | None:
    """The first policy's answer that keeps at least one existing candidate; None: keep all."""
    if request.op_name in current.collect_ops:
        return None  # collecting: every candidate must be timed
    return chain.select(request)


def _kept(items: list, ids: list[str], keep: list[str] | None) -> tuple[list, list[str]]:
    if keep is None:
        return items, ids
    keep_set = set(keep)
    pairs = [(item, cid) for item, cid in zip(items, ids) if cid in keep_set]
    return [item for item, _ in pairs], [cid for _, cid in pairs]


def pre_codegen(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides):
    """Widen, name and prune the KernelTemplateChoices of one autotuning (before any code exists)."""
    if not ktcs:
        return ktcs
    current = settings.current()
    chain = PolicyChain.for_op(op_name)
    if not (current.active or PolicyChain.registered()):
        return ktcs
    if padded_choice.in_padded_graph() or session.lowered_as_off():
        return ktcs  # the padded candidate's own mm, or a GEMM lowered as off: nothing to offer, ask or say
    if op_name == "mm" and current.offers_padded(kernel_inputs.device_type or ""):
        ktcs = _with_padded(ktcs, kernel_inputs)
    if len(ktcs) == 1:  # nothing to choose: say why, when the plugin was asked about it
        if not _max_autotune():
            cpu_gemm.note_no_max_autotune(op_name, current, cpu=kernel_inputs.device_type == "cpu")
        elif kernel_inputs.device_type == "cpu":
            cpu_gemm.note_not_autotuned(op_name, current)
    # fast and quality modes rank Inductor's own candidates (quality: with persistent TMA): widening
    # enumerates the exhaustive list at every lowering, which costs more compile time than either may spend
    # (seconds per GEMM of a large model), for configs the packaged artifacts never saw
    widen = op_name in current.collect_ops or (op_name in current.use_ops and not (current.fast or current.quality))
    if current.search_space == "wide" and widen:
        try:
            ktcs = wide_space.widened(handler, ktcs, kernel_inputs, templates, op_name, kwarg_overrides, current)
        except Exception as exc:  # a torch without the exhaustive list: keep Inductor's space
            warn_once(("space", type(exc)), f"ah_plugin: wider search space unavailable ({exc!r})")
    ids = ktc_ids(ktcs)
    for ktc, cid in zip(ktcs, ids):
        ktc.annotations[ID_ANNOTATION] = cid
    if not chain:
        return ktcs
    request = build_request(op_name, kernel_inputs.nodes(), _offered_so_far(op_name, ids), "pre_codegen")
    return _kept(ktcs, ids, select(request, current, chain))[0]


def _offered_so_far(op_name: str, ids: list[str]) -> list[str]:
    """``ids`` with the candidates earlier calls of the same lowering offered: an addmm's lowering asks for
    its aten kernels and its templates in separate calls on torch 2.13 and newer, and the policies must
    weigh a template against aten, not against the other templates alone."""
    lowering = session.innermost(session.Lowering)
    if lowering is None or lowering.name != op_name:
        return ids
    lowering.offered.extend(cid for cid in ids if cid not in lowering.offered)
    return list(lowering.offered)


def _with_padded(ktcs, kernel_inputs) -> list:
    """``ktcs`` and quality mode's padded candidate where it applies (``padded_choice``)."""
    try:
        extra = padded_choice.padded_ktc(ktcs, kernel_inputs)
    except Exception as exc:  # a torch whose subgraph templates differ: Inductor's candidates as they are
        warn_once(("padded", type(exc)), f"ah_plugin: padded candidate unavailable ({exc!r})")
        return ktcs
    return ktcs if extra is None else [*ktcs, extra]


def preprocess(autotuning: session.Autotuning, choices) -> tuple[list, bool]:
    """The selector call's candidates pruned (when pre-codegen could not), checked and planned; and whether
    the GEMM is to be lowered again as max-autotune off lowers it (the policies kept aten alone, or a lone
    kept template does not compile, in a lowering the plugin wrapped: nothing is benchmarked, and the
    generated code is off's)."""
    if not choices:
        return choices, False
    try:
        asked = _asked(autotuning, choices)
    except Exception as exc:
        warn_once(("post", type(exc)), f"ah_plugin: preprocessing hook failed ({exc!r}); using Inductor's choices")
        return choices, False
    if asked is None:
        return choices, False
    offered = choices
    choices, ids, request, chain, current = asked
    relowers = autotuning.lowering is not None
    if relowers and request.op_name not in current.collect_ops and all(is_aten_choice(cid) for cid in ids):
        return choices, True
    # a lone template that cannot compile: aten as off in a GEMM lowering the plugin wrapped; for a FlexAttention
    # call the results cache answered, the configs as they were offered, timed by Inductor
    flex_hit = request.op_name in FLEX_OPS and len(offered) > 1
    lone_kept = len(choices) == 1 and not is_aten_choice(ids[0]) and (relowers or flex_hit)
    if lone_kept and not _compiles(choices[0], ids[0], current, "aten is used" if relowers else "all are timed"):
        if relowers:
            return choices, True
        choices, ids = offered, caller_ids(offered)  # planned as any autotuning: timed by the mode's method
        request = build_request(autotuning.name, _request_nodes(autotuning, choices), ids, "post_codegen")
    try:
        choices = numerical_check.checked(choices, ids, request, autotuning, chain)
        return _planned(autotuning, choices, request, chain, current), False
    except Exception as exc:
        warn_once(("post", type(exc)), f"ah_plugin: preprocessing hook failed ({exc!r}); using Inductor's choices")
        return choices, False


def _asked(autotuning: session.Autotuning, choices):
    """(choices kept, their ids, the request, the policies, the settings) of the autotuning; None when no
    policy acts on it."""
    current = plans.current_settings()
    if current is None or session.lowered_as_off():
        return None
    chain = PolicyChain.for_op(autotuning.name)
    if not chain:
        return None
    if len(choices) == 1 and not (getattr(choices[0], "annotations", None) or {}).get(ID_ANNOTATION):
        # one candidate no pre-codegen hook saw (the CPU's packed_linear with max-autotune off): nothing to
        # choose, and its inputs may not be laid out yet
        if not _max_autotune():
            cpu_gemm.note_no_max_autotune(autotuning.name, current)
        return None
    nodes = _request_nodes(autotuning, choices)
    if not nodes:
        return None
    ids = caller_ids(choices)
    request = build_request(autotuning.name, nodes, ids, "post_codegen")
    if not all((getattr(c, "annotations", None) or {}).get(ID_ANNOTATION) for c in choices):
        # candidates the pre-codegen hook did not see (C++ and convolution templates, added outside
        # Inductor's template configs): the policies are asked again, with every candidate
        keep = select(request, current, chain)
        if keep is not None:
            choices, ids = _kept(choices, ids, keep)
            request = build_request(autotuning.name, nodes, ids, "post_codegen")
    return choices, ids, request, chain, current


def _max_autotune() -> bool:
    """Whether Inductor autotunes GEMMs in this compile (``mode="max-autotune"`` or its GEMM option)."""
    return bool(getattr(inductor_config, "max_autotune", False) or getattr(inductor_config, "max_autotune_gemm", False))


def _request_nodes(autotuning: session.Autotuning, choices) -> list:
    """The input nodes a request describes: in a GEMM lowering the plugin wrapped, the first candidate's (an
    addmm's aten kernels take the bias as it is, not broadcast); else those of the selector call."""
    nodes = getattr(choices[0], "input_nodes", None)
    if autotuning.lowering is not None and nodes:
        return list(nodes)
    return list(autotuning.input_nodes or [])


def _compiles(choice, choice_id: str, current, instead: str) -> bool:
    """Whether a template kept alone (a results-cache hit, a sure ranking) compiles. Nothing benchmarks a
    lone candidate, so Inductor would first compile it while generating the graph's code, where an error
    ends the user's compile; compiled here (through its benchmark module, which compile-once then reuses),
    a failure costs the template and one warning (``instead`` says what happens then: the GEMM lowered as
    off, or every offered candidate timed). A candidate without a separate compile step counts as compiling."""
    precompile = getattr(choice, "precompile", None)
    try:
        has_request = getattr(choice, "bmreq", None) is not None
    except Exception:  # a subgraph candidate's request cannot be made here: nothing to compile ahead
        has_request = False
    if precompile is None or not has_request or not hasattr(choice, "make_kernel_render"):
        return True
    if current.compile_once:
        compile_once.remember([choice])
    try:
        precompile()
        return True
    except Exception as exc:  # a Triton compile error (out of resources, a bug in a config): aten instead
        warn_once(("lone_compile", choice_id), f"ah_plugin: the kept template {choice_id} failed to "
                  f"compile ({type(exc).__name__}: {str(exc)[:200]}); {instead}")
        return False


def _planned(autotuning: session.Autotuning, choices, request: AutotuneRequest, chain: PolicyChain, current):
    """Put the benchmark plan (timing method, limits) on the candidates that will be benchmarked."""
    if len(choices) < 2:
        return choices  # nothing is benchmarked
    if current.compile_once and request.op_name not in current.collect_ops:
        compile_once.remember(choices)  # not collecting: a few templates per GEMM, one of which may win
    device_type = autotuning.input_nodes[0].get_device().type
    plan = benchmarker.Plan(timing=timing_method(device_type, current), limits=chain.limits(request))
    if plan.timing is None and plan.limits is None:
        return choices
    how = "CUDA-graph replay" if plan.timing == METHOD_REPLAY else "Inductor (per call)"
    verbose(f"{decision_words.gemm(request)}: {len(choices)} candidates timed by "
            f"{how}" + (f", limited to {plan.limits}" if plan.limits else ""))
    autotuning.plan = plan
    session.bind(choices, autotuning)
    return benchmarker.with_plan(choices, plan)


def feedback(timings, name, input_nodes, choices, profiled_time_fn=None, precompile_times=None):
    """Inductor's feedback saver: every candidate's time to the policies, then the aten margin."""
    try:
        current = plans.current_settings()
        chain = PolicyChain.for_op(name)
        if current is None or not choices or not (chain or name in current.use_ops):
            return
        autotuning = session.of_choices(choices)
        plan = autotuning.plan if autotuning is not None else None
        ids = caller_ids(choices)
        method = plan.method() if plan is not None else None
        request = build_request(name, input_nodes, ids, "feedback", timing=method)
        timed: dict[str, float] = {}
        untimed: list[str] = []
        for choice, cid in zip(choices, ids):
            value = timings.get(choice)
            try:
                value = float(value) if value is not None else None
            except (TypeError, ValueError):
                value = None
            if value is None or value != value or value in (float("inf"), float("-inf")):
                untimed.append(cid)
            else:
                timed[cid] = value
    except Exception as exc:
        warn_once(("feedback", type(exc)), f"ah_plugin: feedback hook failed ({exc!r}); nothing recorded")
        return
    chain.tell("on_timings", lambda p: p.on_timings(request, timed, untimed))
    if name in current.collect_ops:
        return  # collecting: Inductor's own pick, nothing else changes
    try:
        _apply_margin(timings, choices, ids, current.aten_margin, aten_margin.baseline(name, ids, request.context))
    except Exception as exc:
        warn_once(("margin", type(exc)), f"ah_plugin: aten margin not applied ({exc!r})")


def _apply_margin(timings, choices, ids, margin: float, aten: set | None = None) -> None:
    """Raise the times of templates that do not beat aten by ``margin`` to just above aten's, so Inductor's
    minimum picks aten unless a template is faster by the margin. ``aten``: the ids of what max-autotune off
    runs (``aten_margin.baseline``: for a FlexAttention kernel off's default config); default, a GEMM's:
    the aten ids. Idempotent (feedback savers run again on in-process cache hits with the same dict)."""
    by_id = {cid: float(timings[c]) for c, cid in zip(choices, ids) if c in timings}
    # aten by id: Inductor counts subgraph candidates (decompose-K, the padded one) as extern, but they
    # compete with aten like templates do, and the results cache's winner (aten_margin.winner) reads ids
    if aten is None:
        aten = aten_margin.baseline("mm", ids)
    losers = aten_margin.losing_templates(by_id, aten, margin)
    if not losers:
        return
    floor = aten_margin.floor_time(by_id, aten)
    for choice, cid in zip(choices, ids):
        if cid in losers:
            timings[choice] = max(float(timings[choice]), floor)
    what = "aten" if all(is_aten_choice(c) for c in aten) else "max-autotune off's config"
    verbose(f"aten margin {margin:g}: {len(losers)} candidate(s) lose to {what}")
