"""Where a step's time goes under max-autotune off: its GPU kernels grouped, against the step's roofline.

    python -m torchgen_ah.evaluation.studies.step_profile --out DIR [--models llama_decode,...] [--steps 10]
        [--max-minutes 3] [--hbm-tbps 4.8] [--peak-tflops 790] [--results benchmarks/RESULTS.md]
    python -m torchgen_ah.evaluation.studies.step_profile --combine A/results.jsonl,B/results.jsonl [--results ...]

For each decoder and encoder of the zoo (``zoo_models``; decoders at prefill and at decode), compiled with
max-autotune off in one fresh process with fresh caches (GPU only): the step's time by CUDA-graph replay of
the compiled call; its kernels from ``torch.profiler`` over ``--steps`` steps run without CUDA graphs
(compiled without them: the same generated kernels, each visible to the profiler), grouped by name
(``kernel_groups``: GEMM, attention, norm, pointwise, other) with each group's share of the step and
kernels per step; and the roofline (``roofline``): the weights streamed once from HBM, the FLOPs at the
GPU's peak, the larger the bound. The table names the lever per model before any code is written.
Rows go to ``OUT/results.jsonl``, the report to ``OUT/step_profile.md`` and the ``step_profile`` section of
``--results``.
"""

from __future__ import annotations

import json
import sys
import time

from ah_plugin.report import command_line
from torchgen_ah.evaluation import compile_cost
from torchgen_ah.evaluation.studies import kernel_groups, roofline
from torchgen_ah.evaluation.markdown_tables import table
from torchgen_ah.evaluation.results_section import save_report

PROG = "python -m torchgen_ah.evaluation.studies.step_profile"
MODELS = ("llama_decode", "llama_prefill", "qwen2_decode", "qwen2_prefill", "gpt2_decode", "gpt2", "bert",
          "mixtral_moe", "t5")
SECTION = "step_profile"
HEADING = "## Where a step's time goes: kernels by group under max-autotune off, against the roofline"
WARM_UP_CALLS = 3


def profiled_kernels(torch, fn, steps: int) -> list[tuple[str, float]]:
    """(name, microseconds) of every GPU kernel ``fn`` launched over ``steps`` calls."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    events = prof.events()
    out = [(e.name, e.time_range.elapsed_us()) for e in events if e.device_type == DeviceType.CUDA]
    if not out:  # kernels attached to the CPU ops that launched them (older profilers)
        out = [(k.name, k.duration) for e in events for k in getattr(e, "kernels", [])]
    return out


def profile_model(torch, name: str, steps: int) -> dict:
    """One model's row: step time, kernels by group per step, the largest kernels, weight bytes, FLOPs."""
    from ah_plugin.inductor.compile_tools import replay_time_ms
    from ah_plugin.replay_timing import ReplayTimingError
    from torchgen_ah.evaluation import e2e_models, zoo_models

    built = zoo_models.build(torch, name, "cuda")
    inputs = built.make_inputs(built.entry.batch)
    compiled = torch.compile(built.model)  # max-autotune off, no CUDA graphs: the profiler sees each kernel
    with torch.no_grad():
        for _ in range(WARM_UP_CALLS):
            compiled(*inputs)
        torch.cuda.synchronize()
        try:
            step_ms, timing = replay_time_ms(lambda: compiled(*inputs)), "CUDA-graph replay"
        except ReplayTimingError as exc:
            print(f"{name}: {exc}; step timed by synchronized calls", flush=True)
            step_ms = 1000 * e2e_models.warm_up(lambda: compiled(*inputs), torch.cuda.synchronize)
            timing = "synchronized calls"
        kernels = profiled_kernels(torch, lambda: compiled(*inputs), steps)
        flops = roofline.step_flops(torch, built.model, inputs)
    entry = built.entry
    return {"model": name, "family": entry.family, "phase": entry.phase or "-", "batch": entry.batch,
            "step_us": step_ms * 1000, "timing": timing, "steps": steps,
            "groups": kernel_groups.group_kernels(kernels, steps),
            "top": kernel_groups.top_kernels(kernels, steps),
            "weight_bytes": roofline.streamed_weight_bytes(torch, built.model), "flops": flops}


def worker(spec: dict) -> None:
    """All models in this one process (none is timed for its compile), each row appended as it is done;
    a model that fails is a row with its error, and the next one runs."""
    import torch

    deadline = spec["deadline"]
    for name in spec["models"]:
        if time.time() > deadline:
            row = {"model": name, "skipped": "time budget (--max-minutes)"}
        else:
            try:
                row = profile_model(torch, name, spec["steps"])
            except Exception as exc:
                row = {"model": name, "skipped": " ".join(f"{type(exc).__name__}: {exc}".split())[:300]}
            torch.compiler.reset()
            torch.cuda.empty_cache()
        with open(spec["result_path"], "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def _group_cell(group: dict, step_us: float) -> str:
    return f"{group['us'] / step_us:.0%} ({group['count']:.0f})" if group["count"] else "-"


def markdown(rows: list[dict], command: str, hbm_tbps: float, peak_tflops: float, note: str | None = None) -> str:
    measured = [r for r in rows if "step_us" in r]
    header = ["model", "phase", "batch", "step us", "kernel us", "kernels", *[g.upper() if g == "gemm" else g
                                                                             for g in kernel_groups.GROUPS],
              "weights MB", "GFLOP", "roofline us", "step / roofline"]
    body = []
    for r in measured:
        groups = r["groups"]
        kernel_us = sum(g["us"] for g in groups.values())
        bound = roofline.roofline_us(r["weight_bytes"], r["flops"], hbm_tbps, peak_tflops)
        body.append([r["model"], r["phase"], str(r["batch"]), f"{r['step_us']:.0f}", f"{kernel_us:.0f}",
                     f"{sum(g['count'] for g in groups.values()):.0f}",
                     *[_group_cell(groups[g], r["step_us"]) for g in kernel_groups.GROUPS],
                     f"{r['weight_bytes'] / 1e6:.0f}", f"{r['flops'] / 1e9:.1f}",
                     f"{bound['bound_us']:.0f} ({bound['bound']})", f"{r['step_us'] / bound['bound_us']:.1f}x"])
    timings = sorted({r["timing"] for r in measured})
    lines = [f"Command: `{command}`", "", *([note, ""] if note else []),
             "Max-autotune off, one process. Step = us per call by " + (" or ".join(timings) or "-") + "; kernels "
             "from torch.profiler over steps run without CUDA graphs (the same generated kernels), per step. A "
             "group's cell: its kernels' time as a share of the step (kernels per step); the rest of the step is "
             "launch gaps. Weights = bytes a step streams (embedding tables left out unless tied to a head); "
             f"roofline = the larger of weights / {hbm_tbps:g} TB/s (memory) and FLOPs / {peak_tflops:g} TFLOP/s "
             "(compute).", "", *table(header, body, text_columns=(0, 1))]
    tops = [f"- {r['model']}: " + "; ".join(f"{k['name'][:70]} ({k['group']}, {k['us']:.0f} us in {k['count']:.0f})"
                                           for k in r["top"]) for r in measured if r.get("top")]
    if tops:
        lines += ["", "Largest kernels per step:", "", *tops]
    skipped = [f"{r['model']} ({r['skipped']})" for r in rows if "skipped" in r]
    if skipped:
        lines += ["", "Not profiled: " + "; ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


def write_report(text: str, out: str, results_md: str | None) -> None:
    save_report(text, out, "step_profile.md", results_md, SECTION, HEADING)


def main(argv=None) -> int:
    parser = command_line.parser(PROG, __doc__.split("\n")[0])
    parser.add_argument("--out", default="step_profile_out", help="folder for the log, caches, results.jsonl and "
                                                                  "step_profile.md")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo entries")
    parser.add_argument("--steps", type=int, default=10, help="steps profiled per model")
    parser.add_argument("--max-minutes", type=float, default=3.0,
                        help="time budget: no model starts after it (the process is stopped a minute later)")
    parser.add_argument("--hbm-tbps", type=float, default=roofline.HBM_TBPS, help="HBM bandwidth, TB/s")
    parser.add_argument("--peak-tflops", type=float, default=roofline.PEAK_TFLOPS, help="dense bf16 peak, TFLOP/s")
    parser.add_argument("--device", default=None, help="cuda (the default when available; the profile needs a GPU)")
    parser.add_argument("--results", default=None,
                        help="also write the report as the step_profile section of this file")
    compile_cost.add_combine_arguments(parser)
    args = compile_cost.parse_or_work(parser, argv, worker)
    if args.combine:
        rows = compile_cost.combined_results("step_profile", args.combine.split(","))
        if isinstance(rows, int):
            return rows
        write_report(markdown(rows, f"{PROG} --combine {args.combine}", args.hbm_tbps, args.peak_tflops, args.note),
                     args.out, args.results)
        return 0
    from torchgen_ah.evaluation import zoo_models

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in zoo_models.ENTRIES]
    if unknown or not models:
        return command_line.fail("step_profile", ValueError(
            f"unknown or no model ({', '.join(unknown) or 'none given'}); known: {', '.join(zoo_models.ENTRIES)}"), 2)
    if compile_cost.pick_device(args.device) != "cuda":
        return command_line.fail("step_profile", RuntimeError("the step profile needs a CUDA GPU (kernels of a GPU "
                                                              "step); none here"), 2)
    result_path = compile_cost.fresh_results_path(args.out)
    rc = compile_cost.run_mode("off", [], "cuda", args.out, args.max_minutes * 60 + 60, PROG.split()[-1],
                  extra={"models": models, "steps": args.steps, "result_path": result_path,
                         "deadline": time.time() + args.max_minutes * 60})
    rows = compile_cost.read_results(result_path)
    command = f"{PROG} " + " ".join(argv if argv is not None else sys.argv[1:])
    note = None if rc == 0 else f"The profiling process ended with exit code {rc} (see {args.out}/off.log)."
    write_report(markdown(rows, command, args.hbm_tbps, args.peak_tflops, note), args.out, args.results)
    return 0 if any("step_us" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
