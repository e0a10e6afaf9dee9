"""Does a GEMM's replay time depend on whether its weight sits in L2? cuBLAS against a Triton template.

    python benchmarks/l2_state.py [--shapes 64x2048x2048,64x2048x5632] [--json OUT.json] [--no-write]

The plugin times candidates by CUDA-graph replay of one GEMM called again and again on the same inputs,
so a weight smaller than L2 stays there from call to call. In a model's step each weight is read once, from
HBM. For small-M GEMMs, which stream their weight, the two can rank cuBLAS and a template differently.
Per shape (bf16, ``x @ W.t()`` as a linear layer computes it) this times by replay:

- ``warm``: every captured call on the same weight (the plugin's replay timing);
- ``cold``: the captured calls cycle over copies of the weight that together exceed twice the L2 size,
  so each call reads its weight from HBM, as a model step does; the activation stays the same.

for aten (``torch.mm``: cuBLAS, what max-autotune off runs) and for the Triton template that max-autotune
picks with Triton as its only GEMM backend (set before torch is imported; the plugin is off). Needs a GPU.
Prints a markdown table and writes the ``l2_state`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
# the decoder's GEMMs at decode (batch 64, one token; torchgen_ah.e2e_models) and one compute-bound shape
DEFAULT_SHAPES = "64x2048x2048,64x2048x5632,64x5632x2048,64x2048x32000,2048x2048x2048"
MAX_COPIES = 64


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``MxKxN,...`` into (m, k, n) tuples (family_timings' parser); at least one shape."""
    from torchgen_ah.evaluation.studies.family_timings import parse_shapes as parse_mkn

    out = parse_mkn(text)
    if not out:
        raise ValueError("no shape given")
    return out


def copies_for(weight_bytes: int, l2_bytes: int) -> int:
    """How many weight copies a cold-weight replay cycles over: together more than twice L2 (at least 2)."""
    return max(2, min(MAX_COPIES, math.ceil(2 * l2_bytes / max(weight_bytes, 1)) + 1))


def time_shape(torch, replay_time_ms, m: int, k: int, n: int, l2_bytes: int) -> dict:
    """{"aten_warm", "aten_cold", "template_warm", "template_cold"} in microseconds for one shape."""
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    count = copies_for(n * k * 2, l2_bytes)
    weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(count)]
    template = torch.compile(lambda a, w: a @ w.t(), mode="max-autotune-no-cudagraphs", dynamic=False)
    template(x, weights[0])  # autotunes once; every copy has the same shape and strides
    out = {}
    for name, fn in (("aten", lambda a, w: torch.mm(a, w.t())), ("template", template)):
        out[f"{name}_warm"] = replay_time_ms(lambda: fn(x, weights[0])) * 1000
        cycle = itertools.cycle(weights)
        calls = count * max(1, math.ceil(20 / count))
        out[f"{name}_cold"] = replay_time_ms(lambda: fn(x, next(cycle)), calls=calls) * 1000
    out["copies"] = count
    out["cold_beyond_l2"] = count * n * k * 2 > 2 * l2_bytes  # False only at the MAX_COPIES cap (small weights)
    return out


def markdown(rows: list[dict], device: str, l2_mb: float, command: str) -> str:
    lines = ["### GEMM time by weight residency in L2 (CUDA-graph replay)", "",
             f"Command: `{command}` on {device} (L2 {l2_mb:.0f} MiB), bf16, `x @ W.t()`. warm: every call on the same "
             "weight; cold: calls cycle over weight copies together larger than twice L2 (as a model step reads "
             "each weight once). Template: max-autotune's pick with Triton as the only GEMM backend.", "",
             "| m x k x n | aten warm us | aten cold us | template warm us | template cold us | "
             "template / aten warm | template / aten cold |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mark = "" if r.get("cold_beyond_l2", True) else " (cold copies within 2x L2)"
        lines.append(f"| {r['shape']}{mark} | {r['aten_warm']:.2f} | {r['aten_cold']:.2f} | {r['template_warm']:.2f} | "
                     f"{r['template_cold']:.2f} | {r['template_warm'] / r['aten_warm']:.3f} | "
                     f"{r['template_cold'] / r['aten_cold']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated MxKxN (default: %(default)s)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as exc:
        print(f"l2_state: --shapes: {exc}", file=sys.stderr)
        return 2
    # before torch is imported: Inductor reads its GEMM backends from the environment, the plugin its switch
    os.environ.setdefault("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS", "TRITON")
    os.environ["AH_PLUGIN_DISABLE"] = "1"
    import torch

    if not torch.cuda.is_available():
        print("l2_state: needs a CUDA GPU (the question is about its L2 cache); nothing measured", file=sys.stderr)
        return 2
    from ah_plugin.inductor.compile_tools import replay_time_ms
    from torchgen_ah.evaluation.results_section import update_results_section

    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 50 * 2**20))
    rows = []
    for m, k, n in shapes:
        row = {"shape": f"{m}x{k}x{n}", **time_shape(torch, replay_time_ms, m, k, n, l2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    command = "python benchmarks/l2_state.py" + ("" if args.shapes == DEFAULT_SHAPES else f" --shapes {args.shapes}")
    text = markdown(rows, torch.cuda.get_device_name(), l2 / 2**20, command)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": torch.cuda.get_device_name(), "l2_bytes": l2, "rows": rows}, f, indent=1)
    if not args.no_write:
        update_results_section(RESULTS, "l2_state", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
