"""One zoo model in one mode, measured inside that mode's own fresh process (``torchgen_ah.evaluation.zoo``).

Compile time is the wall time of every call that compiled, not only the first: a training step compiles
its backward on its first backward pass, and a decoder served at changing batch sizes recompiles (a
static first shape, the dynamic graph, a batch-1 specialization); each of those is time a user waits. The
process also keeps every module Inductor generated, so its code can be compared with max-autotune off's
by hash, and checks each batch size's first result against eager PyTorch's.
"""

from __future__ import annotations

import json
import math
import statistics
import time

UNTIMED_CALLS = 2  # calls after the first in a process that times no steps: what they compile is counted


class CompileClock:
    """Times calls, keeping the wall seconds of those that compiled: Dynamo captured a graph, Inductor lowered
    one or generated a module during the call (a lazily compiled backward, a recompile for a new shape).
    ``compile_tools`` is the adapter's (``ah_plugin.inductor.compile_tools``), which reads those counters."""

    def __init__(self, compile_tools, codes: list, sync):
        self._tools, self._codes, self._sync = compile_tools, codes, sync
        self.seconds: list[float] = []

    def events(self) -> tuple[int, int, int]:
        return self._tools.dynamo_graph_count(), self._tools.inductor_graph_count(), len(self._codes)

    def call(self, fn):
        before = self.events()
        self._sync()
        start = time.perf_counter()
        out = fn()
        self._sync()
        if self.events() != before:
            self.seconds.append(time.perf_counter() - start)
        return out


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def append_row(path: str, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def geometric_mean(values) -> float:
    values = list(values)
    return math.exp(statistics.fmean(math.log(v) for v in values))


def plugin_fields(status: dict) -> dict:
    """What a row says of the plugin (``ah_plugin.status()``): switched on, the ops it ranks, its mode."""
    settings = status["settings"]
    return {"installed": status["installed"], "use": sorted(settings.use),
            "top_k": "fast" if settings.fast else "adaptive" if settings.adaptive else settings.top_k}


def _use_stats(ah_plugin) -> dict | None:
    """The plugin's use-mode counts (``ah_plugin.status()``) as plain data; None where it never acted. A
    count that cannot be read is said in the row, never costs it its measurements."""
    try:
        use = ah_plugin.status().get("use_stats")
        return None if use is None else dict(use.as_dict() if hasattr(use, "as_dict") else vars(use))
    except Exception as exc:
        return {"unreadable": one_line(exc)}


def run(spec: dict) -> None:
    """The ``--worker`` side: build the model, measure it (in one mode, or every mode of the one-process step
    judging, ``zoo_one_process``), append one results line (``skipped`` when the model cannot be built,
    ``failed`` when compiling or running it raised, which then fails the process)."""
    import torch  # lazy: only the mode's own process imports torch

    from torchgen_ah.evaluation import zoo_models, zoo_one_process

    row = {"model": spec["model"], "mode": spec["mode"], "rep": spec.get("rep", 0),
           "kind": zoo_models.ENTRIES[spec["model"]].kind}
    if spec["mode"] == zoo_one_process.ONE_PROCESS:
        measure_built = zoo_one_process.measure
        from ah_plugin.inductor import compile_tools  # this process only

        compile_tools.without_compile_caches()  # every mode lowers and autotunes for itself
    else:
        measure_built = measure_mode
    try:
        built = zoo_models.build(torch, spec["model"], spec["device"])
    except Exception as exc:  # a library missing, an API changed: the model is named and skipped
        append_row(spec["result_path"], {**row, "skipped": one_line(exc)})
        return
    try:
        measured = measure_built(torch, built, spec)
    except Exception as exc:
        append_row(spec["result_path"], {**row, "failed": one_line(exc)})
        raise
    append_row(spec["result_path"], {**row, **measured})


def measure_mode(torch, built, spec: dict) -> dict:
    """One mode in its own process (the plugin as the environment sets it): ``measure``, with the generated
    code's hash and summary and the plugin's counts."""
    import ah_plugin
    from ah_plugin.inductor import compile_tools  # this process only
    from ah_plugin.inductor.generated_code_capture import capturing_code
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary

    plugin = ah_plugin.require_active_from_environment()  # the mode's plugin settings, entry point or not
    benchmarked: list = []
    compile_tools.on_benchmarked(lambda name, count: benchmarked.append(count))
    with capturing_code() as codes:
        measured = measure(torch, built, spec, codes)
    return {**measured, "code": code_fingerprint(codes), "code_summary": code_summary(codes),
            "autotunings": len(benchmarked), "benchmarked": sum(benchmarked), "use_stats": _use_stats(ah_plugin),
            "fused_groups": ah_plugin.status().get("fused_groups"), "plugin": plugin_fields(plugin)}


def measure(torch, built, spec: dict, codes: list) -> dict:
    """Compile, check and (unless ``spec["time_steps"]`` is false: the steps are judged in one process) time
    ``built`` at each of its batch sizes (one, except for the serving pattern)."""
    from ah_plugin.inductor import compile_tools  # this process only
    from torchgen_ah.evaluation import e2e_models
    from torchgen_ah.evaluation.result_check import checked_error

    device = spec["device"]
    compiled = torch.compile(built.model, mode=e2e_models.torch_compile_mode(spec["compile_mode"],
                                                                             spec.get("cudagraphs", False)))

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    clock = CompileClock(compile_tools, codes, sync)
    timed = spec.get("time_steps", True)
    windows = spec.get("windows", e2e_models.STEP_WINDOWS)
    warm_up_s = spec.get("warm_up_seconds", e2e_models.WARMUP_SECONDS)
    batches = built.entry.batches or (built.entry.batch,)
    steps_ms, errors, per_window, late = {}, [], [], 0
    with torch.enable_grad() if built.train else torch.no_grad():
        for batch in batches:
            inputs = built.make_inputs(batch)
            step = e2e_models.step_function(torch, built.model, compiled, inputs, built.train)
            first = clock.call(step).detach().clone()  # a CUDA-graph replay reuses the output's memory
            if timed:
                count = e2e_models.steps_per_window(e2e_models.warm_up(lambda: clock.call(step), sync, warm_up_s))
                before = clock.events()
                times = e2e_models.window_times(step, sync, windows, count)
                late += clock.events() != before
                steps_ms[str(batch)] = statistics.median(times) * 1000
                per_window.append(count)
            else:  # compile only: the calls after the first that may still compile (a recompile, a backward)
                for _ in range(UNTIMED_CALLS):
                    clock.call(step)
            errors.append(checked_error(first, lambda: built.model(*inputs)))
            del first
    checked = [e for e in errors if e is not None]
    out = {"compile_seconds": sum(clock.seconds), "compile_calls": [round(s, 3) for s in clock.seconds],
           "dynamo_graphs": compile_tools.dynamo_graph_count(), "inductor_graphs": len(codes),
           "result_error": max(checked) if checked else None, "unchecked": len(errors) - len(checked)}
    if timed:
        out.update(step_ms=geometric_mean(steps_ms.values()), steps_per_window=min(per_window),
                   compiled_while_timed=late)
        if built.entry.batches:
            out["step_ms_by_batch"] = steps_ms
    return out
