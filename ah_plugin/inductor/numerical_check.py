"""The numerical check a policy may ask for: candidates whose output differs from aten's are dropped.

A policy's ``numerical_check(request) -> (atol, rtol) | None`` asks for it (the results cache does,
on a tuning miss with ``AH_TUNABLE_NUMERICAL_CHECK``); the strictest tolerances of the asking
policies win. Every candidate runs once on the inputs Inductor would benchmark with (the same random
tensors for all), the aten candidate is the reference and is always kept, and ``on_numerical_check
(request, rejected, timings)`` tells the asking policies what was dropped. Anything that fails here
is warned once and every candidate is kept.
"""

from __future__ import annotations

import torch
from torch._inductor.select_algorithm import AlgorithmSelectorCache

from ..policy import AutotuneRequest, PolicyChain
from ..report.messages import warn_once
from ..report.verbose_output import verbose
from .requests import is_extern_caller
from .session import Autotuning


def _run_choices(choices, autotuning: Autotuning) -> list[tuple[object, float]]:
    """Run every choice once on Inductor's benchmark inputs: [(a copy of its output, its time in ms)]."""
    get_inputs = getattr(AlgorithmSelectorCache, "get_inputs", None)
    if get_inputs is None:
        raise RuntimeError("this torch has no AlgorithmSelectorCache.get_inputs")
    args = get_inputs(choices, autotuning.input_nodes, autotuning.layout, autotuning.input_gen_fns)
    results = []
    for choice in choices:
        tensors = args.get_benchmark_tensors(is_extern_caller(choice))
        inputs, out = tensors.input_tensors, tensors.output_tensor
        out.zero_()
        # benchmark() is the one call every ChoiceCaller (and its pre/post-processing wrapper) runs
        # correctly with; its time is handed to the policies too
        ms = choice.benchmark(*inputs, out=out)
        results.append((out.detach().clone(), float(ms)))
    return results


def checked(choices, ids, request: AutotuneRequest, autotuning: Autotuning, chain: PolicyChain):
    """``choices`` without those whose output differs from the aten candidate's beyond the asked tolerances."""
    if len(choices) < 2:
        return choices
    try:
        asked = chain.tolerances(request)
        if asked is None:
            return choices
        asking, atol, rtol = asked
        reference = next((i for i, c in enumerate(choices) if is_extern_caller(c)), None)
        if reference is None:
            warn_once(("check_ref", request.op_name),
                      f"ah_plugin: numerical check for {request.op_name} skipped: no aten candidate to compare with")
            return choices
        runs = _run_choices(choices, autotuning)
        expected = runs[reference][0]
        rejected = []
        for index, ((output, _), cid) in enumerate(zip(runs, ids)):
            if index == reference:
                continue
            same = output.shape == expected.shape and bool(
                torch.allclose(output, expected, atol=atol, rtol=rtol, equal_nan=False)
            )
            if not same:
                rejected.append(cid)
        timings = {cid: ms for (_, ms), cid in zip(runs, ids)}
    except Exception as exc:  # the check is a safety net; failing it must not fail the compile
        warn_once(("check", type(exc)),
                  f"ah_plugin: numerical check failed ({exc!r}); keeping every candidate unchecked")
        return choices
    verbose(f"{request.op_name}: numerical check (atol={atol:g}, rtol={rtol:g}) drops {rejected or 'nothing'}")
    PolicyChain(asking).tell("on_numerical_check", lambda p: p.on_numerical_check(request, rejected, timings))
    dropped = set(rejected)
    return [c for c, cid in zip(choices, ids) if cid not in dropped]
