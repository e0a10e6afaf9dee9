"""End to end: small real models compiled in each autotuning mode; total compile time and step time.

    python -m torchgen_ah.e2e_models --out DIR [--models gpt2,vit] [--modes off,default,ours_adaptive,...]

Models (random weights, inference under ``no_grad``, bf16 on CUDA / fp32 on CPU):
- ``gpt2``: ``transformers.GPT2Model`` from a 4-layer, 512-wide config; batch 4, sequence 128.
- ``vit``: ``timm`` ``vit_small_patch16_224`` (``pretrained=False``); batch 8.
``transformers`` and ``timm`` are imported lazily inside the worker (they exist on the GPU machine).

Each (model, mode) runs in its own process with fresh Inductor/Triton caches (the environments of
``torchgen_ah.compile_cost.mode_environment``). Compile time = the first call's wall time; step time =
the median of 30 timed calls after 5 warm-up calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from torchgen_ah.compile_cost import fresh_results_path, pick_device, read_results, run_mode, run_steps

MODELS = ("gpt2", "vit")
DEFAULT_MODES = ("off", "default", "ours_adaptive", "ours_k10", "builtin_ah", "cache")


def build_model(torch, name: str, device: str):
    """(module, example inputs) for one model name."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if name == "gpt2":
        import transformers

        config = transformers.GPT2Config(n_layer=4, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
        model = transformers.GPT2Model(config)
        inputs = (torch.randint(0, config.vocab_size, (4, 128), device=device),)
    elif name == "vit":
        import timm

        model = timm.create_model("vit_small_patch16_224", pretrained=False)
        inputs = (torch.randn(8, 3, 224, 224, device=device, dtype=dtype),)
    else:
        raise ValueError(f"unknown model {name!r}; known: {MODELS}")
    return model.to(device=device, dtype=dtype).eval(), inputs


def worker(spec: dict) -> None:
    import torch

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
    with open(spec["result_path"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"mode": spec["mode"], "model": spec["model"], "compile_seconds": compile_seconds,
                            "step_ms": statistics.median(steps) * 1000}) + "\n")


def markdown(results: list[dict], command: str) -> str:
    lines = [f"End to end (`{command}`): first-call compile seconds and median step ms", "",
             "| model | mode | compile s | step ms | step vs default |", "| --- | --- | --- | --- | --- |"]
    default = {r["model"]: r["step_ms"] for r in results if r["mode"] == "default"}
    for r in results:
        if r["mode"] == "cache_record":
            continue
        ref = default.get(r["model"])
        rel = f"{r['step_ms'] / ref:.3f}x" if ref else "n/a"
        lines.append(f"| {r['model']} | {r['mode']} | {r['compile_seconds']:.1f} | {r['step_ms']:.3f} | {rel} |")
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
    device = pick_device(args.device)
    result_path = fresh_results_path(args.out)
    deadline = time.time() + args.max_minutes * 60
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    status = {}
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        work = os.path.join(args.out, model)
        os.makedirs(work, exist_ok=True)
        status.update(run_steps(
            modes, deadline,
            lambda step, left: run_mode(step, [], device, work, left, "torchgen_ah.e2e_models",
                                        extra={"model": model, "result_path": result_path}),
            label=f"{model}/"))
    results = read_results(result_path)
    command = "python -m torchgen_ah.e2e_models " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(results, command) + "\nRuns: " + ", ".join(f"{k}: {v}" for k, v in status.items()) + "\n"
    with open(os.path.join(args.out, "e2e.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
