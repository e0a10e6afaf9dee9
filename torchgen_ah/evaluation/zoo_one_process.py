"""The zoo's steps judged in one process: every mode of one model compiled in one fresh process, each inside
its own plugin scope, then timed with interleaved windows (``one_process``).

On the H200 the same compiled code stepped 2-20% apart across fresh processes but 0.1-0.3% apart in one
process with interleaved windows, so the zoo's step ratios come from here. Compile is the per-mode fresh
processes' wall time (``zoo_worker``), or estimated from here where it can be: every mode is compiled with
Inductor's whole-graph cache off (``one_process.NO_GRAPH_CACHE``; with it the control ``off_again`` loaded
off's compiled graph) and its kernels cold, in Inductor and Triton caches of its own (``own_kernel_caches``:
a kept template renumbers the kernels after it, which a mode finding off's kernels compiled then recompiled
while the control did not; ``triton_binaries`` counts what each compiled), so each lowers its graph and
compiles its code into cold caches as off's first compile did, in a process already warm; the
first mode after off less the control is what that mode adds to off's compile (``zoo_report``). Phases:

1. compile: per mode, in the order given, Dynamo's memory of changing sizes cleared (the mode compiles the
   graphs a fresh process would), the mode's plugin scope entered, ``torch.compile`` with the mode's options
   (made distinct, so Dynamo compiles each mode afresh) and the first call at each batch size;
2. settle: a second call per mode and size, in its scope again: a recompile there is the mode's own, and CUDA
   graphs record only after every mode's autotuning (GPU work after a graph's recording slowed that graph
   for the rest of the process on the H200);
3. warm-up per mode and size, outside any scope; 4. per batch size, rounds of one window per mode, the order
   rotating each round.

A graph Dynamo captures in phase 3 or 4 ran outside its mode's scope: the process fails, naming the mode or
phase, rather than report its steps.
"""

from __future__ import annotations

import contextlib
import statistics

from torchgen_ah.evaluation import compile_cost, e2e_models, one_process, own_kernel_caches
from torchgen_ah.evaluation.zoo_worker import CompileClock, geometric_mean, plugin_fields

ONE_PROCESS = "one_process"  # the run plan's name for this process, in place of a mode
# modes with the plugin on: its arguments inside the mode's scope (twins of compile_cost.mode_environment's
# variables, held equal by the tests); every other mode here runs with the plugin off
PLUGIN_ARGS = {"fast": {}, "quality": {"top_k": "quality", "padded_choice": "off"},
               "quality_padded": {"top_k": "quality", "padded_choice": "auto"},
               "fast_tune_all": {"tune_non_gemm": True}, "fast_backed": {"time_unbacked": False}}
# Inductor options a mode adds to its torch.compile mode's
EXTRA_OPTIONS = {"aten_only": {"max_autotune_gemm_backends": "ATEN"}, compile_cost.FROZEN: {"freezing": True}}
OFF_MODES = ("off", "off_again")
MODES = (*OFF_MODES, "default", "aten_only", *PLUGIN_ARGS, "off_frozen", "quality_frozen")


class OutsideScope(RuntimeError):
    """A mode compiled outside its plugin scope: its timed code would not be the mode's."""


def _base(mode: str) -> str:
    return mode[: -len(compile_cost.FROZEN)] if mode.endswith(compile_cost.FROZEN) else mode


def plugin_scope(ah_plugin, mode: str):
    """The plugin switched on as ``mode`` asks for the block (fast mode's ops: ``compile_cost.OURS_USE``)."""
    args = PLUGIN_ARGS.get(_base(mode))
    if args is None:
        return contextlib.nullcontext()
    return ah_plugin.enabled(use=compile_cost.OURS_USE.split(","), **args)


def mode_options(mode: str, cudagraphs: bool) -> dict:
    """``torch.compile`` options of ``mode`` spelled out (call inside its plugin scope: fast and quality
    modes narrow max-autotune's options as ``torch.compile`` looks them up)."""
    from ah_plugin.inductor import compile_tools

    compile_mode = None if _base(mode) in OFF_MODES else compile_cost.MAX_AUTOTUNE
    torch_mode = e2e_models.torch_compile_mode(compile_mode, cudagraphs)
    options = dict(compile_tools.mode_options(torch_mode)) if torch_mode else {}
    options.update(EXTRA_OPTIONS.get(_base(mode), {}))
    if mode.endswith(compile_cost.FROZEN):
        options.update(EXTRA_OPTIONS[compile_cost.FROZEN])
    return options


def measure(torch, built, spec: dict) -> dict:
    """Compile ``spec["modes"]`` of ``built`` in this process and time their steps interleaved (the module
    docstring's phases). Raises ``OutsideScope`` when a mode compiles outside its scope."""
    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary, first_difference

    modes, cudagraphs = spec["modes"], spec.get("cudagraphs", False)

    def sync():
        if spec["device"] == "cuda":
            torch.cuda.synchronize()

    batches = built.entry.batches or (built.entry.batch,)
    inputs = {batch: built.make_inputs(batch) for batch in batches}  # every mode steps on the same tensors
    compile_tools.allow_recompiles(4 * len(modes) * len(batches))
    options = []
    for mode in modes:
        with plugin_scope(ah_plugin, mode):
            options.append({**mode_options(mode, cudagraphs), **one_process.NO_GRAPH_CACHE})
    with torch.enable_grad() if built.train else torch.no_grad():
        compiled = _compile(torch, built, dict(zip(modes, one_process.distinct_options(options))), inputs, sync)
        per_window, windows = _time({mode: c["steps"] for mode, c in compiled.items()}, batches, spec, sync)
    fields = {}
    for mode, c in compiled.items():
        by_batch = {batch: statistics.median(w[mode]) for batch, w in windows.items()}
        checked = [e for e in c["errors"] if e is not None]
        fields[mode] = {"step_ms": geometric_mean(by_batch.values()), "compile_seconds_shared": sum(c["seconds"]),
                        "compile_calls": [round(s, 3) for s in c["seconds"]], "code": code_fingerprint(c["codes"]),
                        "code_summary": code_summary(c["codes"]), "result_error": max(checked) if checked else None,
                        "plugin": c["plugin"], "triton_binaries": c["triton_binaries"],
                        **({"step_ms_by_batch": by_batch} if built.entry.batches else {})}
        off = compiled.get("off")
        if off is not None and mode != "off":
            diff = first_difference(off["codes"], c["codes"])
            if diff is not None:  # what differs from off's code, where the fingerprint says it does
                fields[mode]["code_diff_from_off"] = diff
    return {"modes": list(modes), "steps_per_window": per_window, "windows_ms": windows, "steps": fields,
            "whole_graph_cache": False, own_kernel_caches.ROW_FIELD: own_kernel_caches.PER_MODE
            if all(c["caches"] == own_kernel_caches.PER_MODE for c in compiled.values())
            else own_kernel_caches.FOLDERS_ONLY}


def _compile(torch, built, options: dict, inputs: dict, sync) -> dict:
    """Phases 1 and 2: {mode: {"steps": {batch: step}, "seconds", "codes", "errors", "plugin"}}."""
    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from ah_plugin.inductor.generated_code_capture import capturing_code
    from torchgen_ah.evaluation.result_check import checked_error

    root = compile_tools.cache_folder()  # the process's fresh caches; each mode compiles in a folder of its own
    folders = {mode: own_kernel_caches.mode_folder(root, index, mode) for index, mode in enumerate(options)}
    out = {}
    for mode, opts in options.items():
        compile_tools.forget_dynamic_shapes()
        with own_kernel_caches.own_kernel_caches(folders[mode]) as caches, plugin_scope(ah_plugin, mode), \
                capturing_code() as codes:
            compiled = torch.compile(built.model, options=opts)
            clock = CompileClock(compile_tools, codes, sync)
            steps, errors = {}, []
            for batch, args in inputs.items():
                steps[batch] = e2e_models.step_function(torch, built.model, compiled, args, built.train)
                first = clock.call(steps[batch]).detach().clone()  # a CUDA-graph replay reuses its output
                errors.append(checked_error(first, lambda args=args: built.model(*args)))
                del first
            plugin = plugin_fields(ah_plugin.status())
        if not codes:
            raise OutsideScope(f"{mode} compiled nothing: Dynamo ran a graph compiled for another mode")
        out[mode] = {"steps": steps, "seconds": clock.seconds, "codes": codes, "errors": errors, "plugin": plugin,
                     "caches": caches}
    for mode, c in out.items():
        with own_kernel_caches.own_kernel_caches(folders[mode]), plugin_scope(ah_plugin, mode), \
                capturing_code() as codes:
            clock = CompileClock(compile_tools, codes, sync)
            for step in c["steps"].values():
                clock.call(step)
        c["seconds"] += clock.seconds
        c["codes"] += codes
        c["triton_binaries"] = own_kernel_caches.triton_binaries(folders[mode])
    return out


def _time(steps: dict, batches: tuple, spec: dict, sync) -> tuple[dict, dict]:
    """Phases 3 and 4: ({batch: steps per window}, {batch: {mode: [ms of each window]}})."""
    from ah_plugin.inductor import compile_tools

    per_window, windows = {}, {}
    for batch in batches:
        per_step = []
        for mode, by_batch in steps.items():
            graphs = compile_tools.dynamo_graph_count()
            per_step.append(e2e_models.warm_up(by_batch[batch], sync, spec.get("warm_up_seconds",
                                                                              e2e_models.WARMUP_SECONDS)))
            if one_process.recompiled(graphs, f"{mode}'s warm-up at batch {batch}", "zoo"):
                raise OutsideScope(f"{mode} compiled again in its warm-up at batch {batch}, outside its plugin scope")
        per_window[str(batch)] = e2e_models.steps_per_window(min(per_step))
    graphs = compile_tools.dynamo_graph_count()
    for batch in batches:
        times = one_process.interleaved_windows({mode: by_batch[batch] for mode, by_batch in steps.items()},
                                                spec.get("windows", e2e_models.STEP_WINDOWS), sync,
                                                per_window[str(batch)])
        windows[str(batch)] = {mode: [t * 1000 for t in values] for mode, values in times.items()}
    if one_process.recompiled(graphs, "the timed windows", "zoo"):
        raise OutsideScope("a mode compiled again in the timed windows, outside its plugin scope")
    return per_window, windows
