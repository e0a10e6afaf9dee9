"""End to end: small real models compiled in each autotuning mode; total compile time and step time.

    python -m torchgen_ah.e2e_models --out DIR [--models gpt2,vit] [--modes off,default,ours_adaptive,...]

Models (random weights, inference under ``no_grad``, bf16 on CUDA / fp32 on CPU):
- ``gpt2``: ``transformers.GPT2Model`` from a 4-layer, 512-wide config; batch 8, sequence 256.
- ``vit``: ``timm`` ``vit_small_patch16_224`` (``pretrained=False``); batch 32.
- ``mlp``: three ``nn.Linear`` layers with GELU, torch only (for CPU tests of this tool).
``transformers`` and ``timm`` are imported lazily inside the worker (they exist on the GPU machine).
Their linear layers lower to ``addmm``, which our modes rank with the mm artifact (docs/plugin.md).

Each (model, mode) runs in its own process with fresh Inductor/Triton caches (the environments of
``torchgen_ah.compile_cost.mode_environment``), with the plugin switched on as that environment asks
(checked: the row records it). Compile time = the first call's wall time. Step time, two ways, after 5
warm-up calls: ``step ms`` = median wall time of 30 calls (includes Python and launch overhead, which
dominates small models without CUDA graphs); ``GPU ms`` = one step captured in a CUDA graph and replayed
50 times, timed with CUDA events (the kernels alone: what the autotuning choices change). Autotunings and
choices benchmarked are counted from Inductor's "AUTOTUNE benchmarking ... for N choices" lines in the
mode's log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

from torchgen_ah.evaluation.compile_cost import ALL_MODES, fresh_results_path, pick_device, read_results, run_mode, run_steps

MODELS = ("gpt2", "vit")
KNOWN_MODELS = MODELS + ("mlp",)
DEFAULT_MODES = ("off", "default", "ours_adaptive", "ours_k10", "builtin_ah", "cache")
_AUTOTUNE_LINE = re.compile(r"AUTOTUNE benchmarking takes [0-9.]+ seconds and [0-9.]+ seconds precompiling "
                            r"for (\d+) choices")


def build_model(torch, name: str, device: str):
    """(module, example inputs) for one model name."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if name == "gpt2":
        import transformers  # optional: only this model needs it (on the GPU machine)

        config = transformers.GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
        model = transformers.GPT2Model(config)
        inputs = (torch.randint(0, config.vocab_size, (8, 256), device=device),)
    elif name == "vit":
        import timm  # optional: only this model needs it (on the GPU machine)

        model = timm.create_model("vit_small_patch16_224", pretrained=False)
        inputs = (torch.randn(32, 3, 224, 224, device=device, dtype=dtype),)
    elif name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 96),
                                    torch.nn.GELU(), torch.nn.Linear(96, 32))
        inputs = (torch.randn(24, 64, device=device, dtype=dtype),)
    else:
        raise ValueError(f"unknown model {name!r}; known: {KNOWN_MODELS}")
    return model.to(device=device, dtype=dtype).eval(), inputs


def graph_step_ms(torch, call, replays: int = 50) -> tuple[float | None, str]:
    """GPU time of one step: ``call`` captured in a CUDA graph, replayed ``replays`` times between CUDA
    events. (None, why) when capture fails: the wall-clock step time is then the only figure."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        graph.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / replays, "ok"
    except Exception as exc:  # capture is best effort: report why, keep the wall-clock figure
        return None, f"{type(exc).__name__}: {exc}"[:200]


def worker(spec: dict) -> None:
    import torch  # lazy: only the mode's own process imports torch; the parent's modules stay cheap

    import ah_plugin

    plugin = ah_plugin.require_active_from_environment()  # the mode's plugin settings, entry point or not
    device = spec["device"]
    model, inputs = build_model(torch, spec["model"], device)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    compiled = torch.compile(model, mode=spec["compile_mode"])
    with torch.no_grad():
        sync()
        start = time.perf_counter()
        compiled(*inputs)
        sync()
        compile_seconds = time.perf_counter() - start
        for _ in range(5):
            compiled(*inputs)
        steps = []
        for _ in range(30):
            sync()
            start = time.perf_counter()
            compiled(*inputs)
            sync()
            steps.append(time.perf_counter() - start)
        gpu_ms, gpu_note = (graph_step_ms(torch, lambda: compiled(*inputs)) if device == "cuda"
                            else (None, "not a CUDA device"))
    settings = plugin["settings"]
    with open(spec["result_path"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"mode": spec["mode"], "model": spec["model"], "compile_seconds": compile_seconds,
                            "step_ms": statistics.median(steps) * 1000, "gpu_ms": gpu_ms, "gpu_note": gpu_note,
                            "plugin": {"installed": plugin["installed"], "use": sorted(settings.use),
                                       "top_k": "adaptive" if settings.adaptive else settings.top_k}}) + "\n")


def autotune_counts(log_path: str) -> tuple[int, int] | None:
    """(autotunings, choices benchmarked in all of them) from Inductor's lines in a mode's log; None
    when the log is missing."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            counts = [int(m.group(1)) for m in _AUTOTUNE_LINE.finditer(f.read())]
    except OSError:
        return None
    return len(counts), sum(counts)


def markdown(results: list[dict], command: str) -> str:
    lines = [f"End to end (`{command}`): first-call compile seconds, median step ms (wall) and GPU ms "
             "(CUDA graph replay)", "",
             "| model | mode | plugin use | compile s | compile vs default | autotunings | choices benchmarked "
             "| step ms | GPU ms | GPU vs default |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    default = {r["model"]: r for r in results if r["mode"] == "default"}
    for r in results:
        if r["mode"] == "cache_record":
            continue
        ref = default.get(r["model"], {})
        gpu = r.get("gpu_ms")
        gpu_rel = f"{gpu / ref['gpu_ms']:.3f}x" if gpu and ref.get("gpu_ms") else "n/a"
        compile_rel = f"{r['compile_seconds'] / ref['compile_seconds']:.2f}x" if ref else "n/a"
        counts = r.get("autotune")
        tuned, choices = (counts if counts else ("n/a", "n/a"))
        plugin = r.get("plugin") or {}
        use = ",".join(plugin.get("use") or []) or "-"
        lines.append(f"| {r['model']} | {r['mode']} | {use} | {r['compile_seconds']:.1f} | {compile_rel} | {tuned} "
                     f"| {choices} | {r['step_ms']:.3f} | {'n/a' if gpu is None else f'{gpu:.3f}'} | {gpu_rel} |")
    notes = sorted({f"{r['model']}/{r['mode']}: {r['gpu_note']}" for r in results
                    if r.get("gpu_ms") is None and r.get("gpu_note")})
    if notes:
        lines += ["", "No GPU time: " + "; ".join(notes)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchgen_ah.e2e_models", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="e2e_out")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--device", default=None)
    parser.add_argument("--max-minutes", type=float, default=2.0)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        with open(args.worker, encoding="utf-8") as f:
            worker(json.load(f))
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in models if m not in KNOWN_MODELS] + [m for m in modes if m not in ALL_MODES]
    if unknown:
        print(f"error: unknown model or mode {unknown}; models: {KNOWN_MODELS}, modes: {ALL_MODES}", file=sys.stderr)
        return 2
    device = pick_device(args.device)
    result_path = fresh_results_path(args.out)
    deadline = time.time() + args.max_minutes * 60
    status = {}
    for model in models:
        work = os.path.join(args.out, model)
        os.makedirs(work, exist_ok=True)
        status.update(run_steps(
            modes, deadline,
            lambda step, left: run_mode(step, [], device, work, left, "torchgen_ah.evaluation.e2e_models",
                                        extra={"model": model, "result_path": result_path}),
            label=f"{model}/"))
    results = read_results(result_path)
    for r in results:  # Inductor's own count of what each run autotuned
        r["autotune"] = autotune_counts(os.path.join(args.out, r["model"], f"{r['mode']}.log"))
    command = "python -m torchgen_ah.e2e_models " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(results, command) + "\nRuns: " + ", ".join(f"{k}: {v}" for k, v in status.items()) + "\n"
    with open(os.path.join(args.out, "e2e.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
