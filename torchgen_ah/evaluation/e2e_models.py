"""End to end: real models compiled in each autotuning mode; whole-compile time and step time.

    python -m torchgen_ah.e2e_models --out DIR [--models gpt2,vit,...] [--modes off,default,fast,plugin_k10]
        [--reps 3] [--run-timeout 300] [--results benchmarks/RESULTS.md]

Models (random weights, bf16 on CUDA / fp32 on CPU; inference under ``no_grad`` unless named ``_train``):
- ``gpt2``: ``transformers.GPT2Model`` with GPT-2 small's config (12 layers, 768 wide); batch 8, sequence 256.
- ``vit``: ``timm`` ``vit_small_patch16_224`` (``pretrained=False``); batch 32.
- ``llama_prefill`` / ``llama_decode``: a Llama-style decoder built from a ``transformers.LlamaConfig``
  (4 layers, hidden 2048, 16 heads, MLP 5632, vocabulary 32000); prefill batch 8 x 256 tokens, decode
  batch 64 x 1 token (no KV cache).
- ``vit_train``: one training step (forward and backward of the mean of the output) of the ViT.
- ``mlp``: three ``nn.Linear`` layers with GELU, torch only (for CPU tests of this tool).
``transformers`` and ``timm`` are imported lazily inside the worker (they exist on the GPU machine). Their
linear layers lower to ``addmm``, which the plugin ranks with the mm artifact.

``--once default`` runs the named modes in the first repetition only, so a run of ``--reps 3`` can hold
default max-autotune (minutes per model) next to three processes of the cheap modes. Each (repetition,
model, mode) runs in its own process with fresh Inductor/Triton caches (the environments
of ``torchgen_ah.compile_cost.mode_environment``); repetitions are the outer loop, then modes in the order
given (a time budget cuts the last ones), then models. On CUDA the modes run as users run them: max-autotune off is
``mode="reduce-overhead"`` (CUDA graphs, no autotuning) and every max-autotune mode is ``mode="max-autotune"``
(CUDA graphs too). Compile time = the first call's wall time (Dynamo, Inductor, autotuning and the first run).
Step time = after at least a second of warm-up steps (the GPU's clocks settle after a compile that left it
idle or busy autotuning), the median over 20 windows of back-to-back calls (each window at least 20 ms and
10 calls, synchronized at its ends) of the window's wall time per call (CUDA-graph replays), so host
synchronization after every call does not count.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time

from ah_plugin.report import command_line
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.compile_cost import (
    ALL_MODES,
    MAX_AUTOTUNE,
    add_combine_arguments,
    combined_results,
    fresh_results_path,
    mode_name,
    parse_or_work,
    pick_device,
    read_results,
    run_mode,
    run_steps,
)
from torchgen_ah.evaluation.results_section import save_report

MODELS = ("gpt2", "vit", "llama_prefill", "llama_decode", "vit_train")
KNOWN_MODELS = MODELS + ("mlp",)
DEFAULT_MODES = ("off", "fast", "quality", "default", "plugin_k10")
# the fast-mode bars: compile at most this multiple of max-autotune off's, steps at most this multiple of
# the better of off and default max-autotune
COMPILE_BAR = 1.3
STEP_BAR = 1.01
# the quality-mode bars: step time over models (geomean) at most this multiple of min(off, default), each
# model compiling in no more than default max-autotune's time
QUALITY_STEP_BAR = 0.97
STEP_WINDOWS = 20  # timed windows; the step time is the median window's time per step
MIN_STEPS_PER_WINDOW = 10
WINDOW_SECONDS = 0.02  # a window lasts at least this long (a decode step is half a millisecond)
WARMUP_SECONDS = 1.0  # untimed steps first: the compile left the GPU idle or busy autotuning; clocks settle
_AUTOTUNE_LINE = re.compile(r"AUTOTUNE benchmarking takes [0-9.]+ seconds and [0-9.]+ seconds precompiling "
                            r"for (\d+) choices")


def _llama(torch, batch: int, tokens: int, device: str):
    import transformers  # optional: only the Llama models need it (on the GPU machine)

    config = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                                      num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                                      max_position_embeddings=2048, use_cache=False)
    return transformers.LlamaForCausalLM(config), (torch.randint(0, config.vocab_size, (batch, tokens), device=device),)


class _TensorOut:
    """Wraps a model whose forward returns a ``ModelOutput``: the first tensor (what a step consumes)."""

    @staticmethod
    def wrap(torch, model):
        class FirstTensor(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                out = self.inner(*args)
                return out if isinstance(out, torch.Tensor) else out[0]

        return FirstTensor(model)


def build_model(torch, name: str, device: str):
    """(module returning one tensor, example inputs, whether a step trains) for one model name. The
    weights are created on ``device``: initialising a 300M-parameter decoder on the CPU costs each
    process seconds that have nothing to do with what is measured."""
    with torch.device(device):
        return _build_model(torch, name, device)


def _build_model(torch, name: str, device: str):
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    train = name.endswith("_train")
    base = name[: -len("_train")] if train else name
    if base == "gpt2":
        import transformers  # optional: only this model needs it (on the GPU machine)

        config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
        model = transformers.GPT2Model(config)
        inputs = (torch.randint(0, config.vocab_size, (8, 256), device=device),)
    elif base == "vit":
        import timm  # optional: only this model needs it (on the GPU machine)

        model = timm.create_model("vit_small_patch16_224", pretrained=False)
        inputs = (torch.randn(32, 3, 224, 224, device=device, dtype=dtype),)
    elif base == "llama_prefill":
        model, inputs = _llama(torch, 8, 256, device)
    elif base == "llama_decode":
        model, inputs = _llama(torch, 64, 1, device)
    elif base == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 96),
                                    torch.nn.GELU(), torch.nn.Linear(96, 32))
        inputs = (torch.randn(24, 64, device=device, dtype=dtype),)
    else:
        raise ValueError(f"unknown model {name!r}; known: {KNOWN_MODELS}")
    model = _TensorOut.wrap(torch, model).to(device=device, dtype=dtype)
    return (model.train() if train else model.eval()), inputs, train


def torch_compile_mode(compile_mode: str | None, cudagraphs: bool) -> str | None:
    """The ``torch.compile`` mode a user runs: with CUDA graphs, off is "reduce-overhead" and max-autotune
    is "max-autotune"."""
    if not cudagraphs:
        return compile_mode
    return "max-autotune" if compile_mode == MAX_AUTOTUNE else "reduce-overhead"


def worker(spec: dict) -> None:
    import torch  # lazy: only the mode's own process imports torch; the parent's modules stay cheap

    import ah_plugin
    from ah_plugin.inductor import compile_tools  # this process only

    plugin = ah_plugin.require_active_from_environment()  # the mode's plugin settings, entry point or not
    benchmarked: list = []
    compile_tools.on_benchmarked(lambda name, count: benchmarked.append(count))
    device = spec["device"]
    model, inputs, train = build_model(torch, spec["model"], device)
    compiled = torch.compile(model, mode=torch_compile_mode(spec["compile_mode"], spec.get("cudagraphs", False)))

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    step = step_function(torch, model, compiled, inputs, train)
    with torch.enable_grad() if train else torch.no_grad():
        sync()
        start = time.perf_counter()
        step()
        sync()
        compile_seconds = time.perf_counter() - start
        tuned = list(benchmarked)
        per_window = steps_per_window(warm_up(step, sync))
        steps = window_times(step, sync, STEP_WINDOWS, per_window)
    settings = plugin["settings"]
    with open(spec["result_path"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"mode": spec["mode"], "model": spec["model"], "rep": spec.get("rep", 0),
                            "compile_seconds": compile_seconds, "step_ms": statistics.median(steps) * 1000,
                            "autotunings": len(tuned), "benchmarked": sum(tuned), "steps_per_window": per_window,
                            "plugin": {"installed": plugin["installed"], "use": sorted(settings.use),
                                       "top_k": ("fast" if settings.fast else
                                                 "adaptive" if settings.adaptive else settings.top_k)}}) + "\n")


def step_function(torch, model, compiled, inputs, train: bool):
    """One step as a loop runs it: the compiled call; when training, the backward of the output's mean too."""

    def step():
        if train:
            # as an optimizer's zero_grad does: last step's gradients are outputs of the CUDA-graphed
            # backward, whose memory the next replay reuses, so they are never accumulated into
            model.zero_grad(set_to_none=True)
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the previous one's outputs are done
        out = compiled(*inputs)
        if train:
            out.float().mean().backward()
        return out

    return step


def warm_up(step, sync, seconds: float = WARMUP_SECONDS, min_steps: int = 5) -> float:
    """Run ``step`` for at least ``seconds`` and ``min_steps`` calls, each synchronized; the median seconds
    of one step (a mean would let a few host stalls shrink the windows sized from it)."""
    sync()
    start = time.perf_counter()
    times = []
    while len(times) < min_steps or time.perf_counter() - start < seconds:
        begin = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - begin)
    return statistics.median(times)


def window_times(step, sync, windows: int, per_window: int) -> list[float]:
    """Seconds per step of each of ``windows`` windows of ``per_window`` back-to-back steps (as a serving or
    training loop runs them), synchronized only at a window's ends."""
    out = []
    for _ in range(windows):
        sync()
        start = time.perf_counter()
        for _ in range(per_window):
            step()
        sync()
        out.append((time.perf_counter() - start) / per_window)
    return out


def steps_per_window(step_seconds: float) -> int:
    """Calls per timed window: enough for ``WINDOW_SECONDS``, at least ``MIN_STEPS_PER_WINDOW``."""
    if step_seconds <= 0:
        return MIN_STEPS_PER_WINDOW
    return max(MIN_STEPS_PER_WINDOW, math.ceil(WINDOW_SECONDS / step_seconds))


def autotune_counts(log_path: str) -> tuple[int, int] | None:
    """(autotunings, choices benchmarked in all of them) from Inductor's lines in a mode's log; None
    when the log is missing."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            counts = [int(m.group(1)) for m in _AUTOTUNE_LINE.finditer(f.read())]
    except OSError:
        return None
    return len(counts), sum(counts)


def medians(results: list[dict]) -> dict:
    """{(model, mode): {"compile_seconds", "step_ms", "benchmarked", "reps"}}: medians over repetitions."""
    groups: dict = {}
    for r in results:
        groups.setdefault((r["model"], r["mode"]), []).append(r)
    return {key: {"compile_seconds": statistics.median(r["compile_seconds"] for r in rows),
                  "step_ms": statistics.median(r["step_ms"] for r in rows),
                  "benchmarked": statistics.median(r.get("benchmarked", 0) for r in rows), "reps": len(rows)}
            for key, rows in groups.items()}


def mode_verdicts(table: dict, mode: str = "fast") -> list[dict]:
    """Per model with off and ``mode`` measured: compile / off's, compile / default's (when measured) and
    step / min(off, default)."""
    out = []
    for model in dict.fromkeys(m for m, _ in table):
        off, default, ours = (table.get((model, name)) for name in ("off", "default", mode))
        if not (off and ours):
            continue
        best_step = min(r["step_ms"] for r in (off, default) if r)
        compile_ratio = ours["compile_seconds"] / off["compile_seconds"]
        step_ratio = ours["step_ms"] / best_step
        vs_default = ours["compile_seconds"] / default["compile_seconds"] if default else None
        # without default the step ratio is to off alone, a lower bound of the one to min(off, default)
        passes = compile_ratio <= COMPILE_BAR and step_ratio <= STEP_BAR if mode == "fast" else \
            vs_default is not None and vs_default <= 1.0
        out.append({"model": model, "compile_ratio": compile_ratio, "step_ratio": step_ratio,
                    "compile_vs_default": vs_default, "default_measured": default is not None,
                    "met": default is not None and passes, "missed": not passes and (default is not None or mode == "fast")})
    return out


def _verdict_lines(mode: str, verdicts: list[dict]) -> list[str]:
    if mode == "fast":
        head = (f"Fast mode against the bars (compile <= {COMPILE_BAR}x off, step <= {STEP_BAR}x "
                "min(off, default), per model):")
    else:
        head = (f"Quality mode against the bars (step <= {QUALITY_STEP_BAR}x min(off, default) over models, "
                "compile <= default's per model; the per-model column is the compile bar):")
    bar = "bar" if mode == "fast" else "compile bar"
    lines = ["", head, "", f"| model | compile / off | compile / default | step / min(off, default) | {bar} |",
             "| --- | ---: | ---: | ---: | --- |"]
    for v in verdicts:
        verdict = "met" if v["met"] else "missed" if v["missed"] else \
            "not judged (default not measured: step vs off only)"
        if v["missed"] and not v["default_measured"] and v["step_ratio"] > STEP_BAR:
            verdict += " (step against off alone)"
        vs_default = "-" if v["compile_vs_default"] is None else f"{v['compile_vs_default']:.2f}"
        lines.append(f"| {v['model']} | {v['compile_ratio']:.2f} | {vs_default} | {v['step_ratio']:.3f} | {verdict} |")
    step_gm = geomean([v["step_ratio"] for v in verdicts])
    lines += ["", f"Geomean over models: compile {geomean([v['compile_ratio'] for v in verdicts]):.2f}x off, "
                  f"step {step_gm:.3f}x min(off, default)."]
    if mode == "quality":
        # where default is missing the ratio is to off alone, a lower bound of the one to min(off, default)
        full = all(v["default_measured"] for v in verdicts)
        verdict = ("met" if full else "not judged: default not measured on every model") \
            if step_gm <= QUALITY_STEP_BAR else "missed"
        lines[-1] += f" Step bar (<= {QUALITY_STEP_BAR}x): {verdict}."
    return lines


def step_method(results: list[dict]) -> str:
    """How the rows' steps were timed: rows without ``steps_per_window`` predate the time-based warm-up."""
    if results and all("steps_per_window" in r for r in results):
        return (f"the median of {STEP_WINDOWS} windows of back-to-back calls (each at least "
                f"{WINDOW_SECONDS * 1000:.0f} ms and {MIN_STEPS_PER_WINDOW} calls) after {WARMUP_SECONDS:.0f} s of "
                "warm-up steps")
    if any("steps_per_window" in r for r in results):
        return (f"timed two ways (rows with `steps_per_window`: {STEP_WINDOWS} windows after {WARMUP_SECONDS:.0f} s "
                "of warm-up; the others: 10 windows of 10 calls after 5 warm-up calls)")
    return "the median of 10 windows of 10 back-to-back calls after 5 warm-up calls"


def markdown(results: list[dict], command: str, status: dict | None = None, note: str | None = None) -> str:
    table = medians(results)
    modes = [m for m in ALL_MODES if any(mode == m for _, mode in table)]
    lines = [f"Command: `{command}`", "", *([note, ""] if note else []),
             "Compile = first-call wall seconds (fresh process, fresh caches); step = ms per call, "
             f"{step_method(results)}; medians over the repetitions (reps column); benchmarked = choices Inductor "
             "timed.", "",
             "| model | mode | reps | compile s | step ms | benchmarked |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for model in dict.fromkeys(m for m, _ in table):
        for mode in modes:
            row = table.get((model, mode))
            if row:
                lines.append(f"| {model} | {mode} | {row['reps']} | {row['compile_seconds']:.1f} | "
                             f"{row['step_ms']:.3f} | {row['benchmarked']:.0f} |")
    for mode in ("fast", "quality"):
        verdicts = mode_verdicts(table, mode)
        if verdicts:
            lines += _verdict_lines(mode, verdicts)
    if status:
        failed = {k: v for k, v in status.items() if v != "ok"}
        if failed:
            lines += ["", "Runs that did not finish: " + ", ".join(f"{k}: {v}" for k, v in failed.items())]
    return "\n".join(lines) + "\n"


def write_report(text: str, out: str, results_md: str | None) -> None:
    save_report(text, out, "e2e.md", results_md, "e2e_models", "## Real models: compile and step time per mode")


def combine(paths: list[str], out: str, results_md: str | None, note: str | None = None) -> int:
    """One report over the rows of several runs' results files (each row a fresh process)."""
    results = combined_results("e2e_models", paths)
    if isinstance(results, int):
        return results
    command = "python -m torchgen_ah.e2e_models --combine " + ",".join(paths)
    write_report(markdown(results, command, note=note), out, results_md)
    return 0


def main(argv=None) -> int:
    parser = command_line.parser("python -m torchgen_ah.e2e_models", __doc__.split("\n")[0])
    parser.add_argument("--out", default="e2e_out", help="folder for logs, caches and results")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(KNOWN_MODELS)}")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated, of {', '.join(ALL_MODES)}")
    parser.add_argument("--reps", type=int, default=1, help="fresh processes per (model, mode)")
    parser.add_argument("--once", default="",
                        help="comma-separated modes of --modes run in the first repetition only (e.g. default, "
                             "whose compile takes minutes), so the others get --reps processes within one run")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available, else cpu)")
    parser.add_argument("--no-cudagraphs", action="store_true",
                        help="compile with max-autotune-no-cudagraphs / no mode instead of the CUDA-graph modes")
    parser.add_argument("--max-minutes", type=float, default=10.0, help="time budget of the whole run")
    parser.add_argument("--run-timeout", type=float, default=300.0, help="seconds one process may take")
    parser.add_argument("--results", default=None, help="also write the report as a section of this markdown file")
    add_combine_arguments(parser)
    args = parse_or_work(parser, argv, worker)
    if args.combine:
        return combine(args.combine.split(","), args.out, args.results, args.note)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    modes = [mode_name(m.strip()) for m in args.modes.split(",") if m.strip()]
    once = {mode_name(m.strip()) for m in args.once.split(",") if m.strip()}
    unknown = [m for m in models if m not in KNOWN_MODELS] + [m for m in modes if m not in ALL_MODES]
    if once - set(modes):
        return command_line.fail("e2e_models", ValueError(
            f"--once names {', '.join(sorted(once - set(modes)))}, not in --modes ({', '.join(modes)})"), 2)
    if unknown:
        return command_line.fail("e2e_models", ValueError(
            f"unknown model or mode {', '.join(unknown)}; models: {', '.join(KNOWN_MODELS)}, modes: "
            f"{', '.join(ALL_MODES)}"), 2)
    device = pick_device(args.device)
    cudagraphs = device == "cuda" and not args.no_cudagraphs
    result_path = fresh_results_path(args.out)
    deadline = time.time() + args.max_minutes * 60
    status = {}
    # modes outside models: a time budget cuts the costly modes (listed last), not whole models
    for rep in range(args.reps):
        for mode in modes:
            if rep and mode in once:
                continue
            for model in models:
                work = os.path.join(args.out, model, f"rep{rep}")
                os.makedirs(work, exist_ok=True)
                status.update(run_steps(
                    [mode], deadline,
                    lambda step, left, model=model, work=work, rep=rep: run_mode(
                        step, [], device, work, min(left, args.run_timeout), "torchgen_ah.evaluation.e2e_models",
                        extra={"model": model, "rep": rep, "result_path": result_path, "cudagraphs": cudagraphs}),
                    label=f"{model}/rep{rep}/", process_limit=args.run_timeout))
    results = read_results(result_path)
    command = "python -m torchgen_ah.e2e_models " + " ".join(argv if argv is not None else sys.argv[1:])
    write_report(markdown(results, command, status), args.out, args.results)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
