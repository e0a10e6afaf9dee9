"""Padding and epilogue fusion against cuBLAS, timed by CUDA-graph replay (the two GEMM families that are
not candidates of one autotuning, so a collection log cannot show them).

    python -m torchgen_ah.evaluation.studies.family_timings --out DIR [--shapes 13x1000x4099,...] [--epilogue ...]

* **Padding**: an unaligned ``a @ b`` (bf16) three ways: cuBLAS on the operands as they are; both
  operands zero-padded to multiples of ``--pad-to`` at run time, the product sliced back (what Inductor's
  ``pad_mm`` pass emits); and only the activation padded, the weight padded once beforehand (what a
  frozen weight costs). Every variant is one callable timed by ``ah_plugin.replay_timing``.
* **Epilogue fusion**: ``gelu(x @ w.T + bias)`` compiled with max-autotune off (cuBLAS addmm, GELU in its
  own kernel) and with Triton as the only GEMM backend (the bias and GELU fused into the template's
  epilogue; Inductor's own per-call autotuning picks the config), each compiled function timed by replay.

Writes ``family_timings.json`` under ``--out`` and prints a markdown table;
``torchgen_ah.evaluation.studies.gemm_families`` puts it beside the collection log's per-family table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

DEFAULT_PAD_SHAPES = "13x1000x4099,333x4097x129,4097x4097x511,1000x1000x1000,7x4096x1024,2049x4095x4097"
DEFAULT_EPILOGUE_SHAPES = "2048x768x3072,6304x384x1536,2048x2048x5632,64x2048x5632,32x384x1000"


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``MxKxN`` items, comma-separated. ValueError naming the bad item."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"bad shape {item!r}: expected MxKxN with positive integers, e.g. 13x1000x4099")
        out.append(tuple(int(p) for p in parts))
    return out


def padded(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


def time_padding(torch, shapes, multiple: int) -> list[dict]:
    from ah_plugin.inductor.compile_tools import replay_time_ms

    rows = []
    for m, k, n in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        pm, pk, pn = padded(m, multiple), padded(k, multiple), padded(n, multiple)
        b_once = torch.nn.functional.pad(b, (0, pn - n, 0, pk - k))
        F = torch.nn.functional

        def runtime_pad():
            out = F.pad(a, (0, pk - k, 0, pm - m)) @ F.pad(b, (0, pn - n, 0, pk - k))
            return out[:m, :n]

        def weight_once():
            return (F.pad(a, (0, pk - k, 0, pm - m)) @ b_once)[:m, :n]

        row = {"m": m, "k": k, "n": n, "pad_to": multiple,
               "cublas_us": replay_time_ms(lambda: a @ b) * 1000,
               "padded_runtime_us": replay_time_ms(runtime_pad) * 1000,
               "padded_weight_once_us": replay_time_ms(weight_once) * 1000}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def time_epilogue(torch, shapes) -> list[dict]:
    from ah_plugin.inductor.compile_tools import replay_time_ms

    F = torch.nn.functional
    rows = []
    for m, k, n in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)

        def layer(x, w, bias):
            return F.gelu(F.linear(x, w, bias))

        row = {"m": m, "k": k, "n": n}
        for label, options in (("cublas_unfused", None),
                               ("triton_fused", {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON"})):
            torch.compiler.reset()
            compiled = torch.compile(layer, options=options) if options else torch.compile(layer)
            compiled(x, w, bias)
            row[f"{label}_us"] = replay_time_ms(lambda: compiled(x, w, bias)) * 1000
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def markdown(result: dict) -> str:
    lines = []
    if result.get("padding"):
        lines += ["Padding (bf16, zero-padded to multiples of "
                  f"{result['padding'][0]['pad_to']}; us per call by CUDA-graph replay):", "",
                  "| m x k x n | cuBLAS as is | padded at run time | weight padded once | best padded / as is |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for r in result["padding"]:
            best = min(r["padded_runtime_us"], r["padded_weight_once_us"])
            lines.append(f"| {r['m']}x{r['k']}x{r['n']} | {r['cublas_us']:.1f} | {r['padded_runtime_us']:.1f} | "
                         f"{r['padded_weight_once_us']:.1f} | {best / r['cublas_us']:.3f} |")
        lines.append("")
    if result.get("epilogue"):
        lines += ["Epilogue fusion, `gelu(x @ w.T + bias)` bf16 (us per call of the compiled function by replay):", "",
                  "| m x k x n | cuBLAS addmm + GELU kernel (off) | Triton template, bias+GELU fused | fused / off |",
                  "| --- | ---: | ---: | ---: |"]
        for r in result["epilogue"]:
            lines.append(f"| {r['m']}x{r['k']}x{r['n']} | {r['cublas_unfused_us']:.1f} | {r['triton_fused_us']:.1f} | "
                         f"{r['triton_fused_us'] / r['cublas_unfused_us']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchgen_ah.evaluation.studies.family_timings",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="folder for family_timings.json (needed unless --from-json)")
    parser.add_argument("--from-json", default=None, metavar="FILE",
                        help="time nothing: report an earlier run's family_timings.json")
    parser.add_argument("--results", default=None,
                        help="also write the report as the family_timings section of this markdown file")
    parser.add_argument("--pad-shapes", default=DEFAULT_PAD_SHAPES, help="MxKxN,... (default: %(default)s)")
    parser.add_argument("--pad-to", type=int, default=16, help="pad every dimension to a multiple of this")
    parser.add_argument("--epilogue-shapes", default=DEFAULT_EPILOGUE_SHAPES, help="MxKxN,... (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.from_json:
        try:
            with open(args.from_json, encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, ValueError) as exc:
            parser.error(f"{args.from_json}: {exc}")
        write_report(result, f"python -m torchgen_ah.evaluation.studies.family_timings --from-json {args.from_json}",
                     args.results)
        return 0
    if not args.out:
        parser.error("--out is needed to time anything (or --from-json FILE to report a run)")
    try:
        pad_shapes, epilogue_shapes = parse_shapes(args.pad_shapes), parse_shapes(args.epilogue_shapes)
    except ValueError as exc:
        parser.error(str(exc))
    import torch

    if not torch.cuda.is_available():
        print("family_timings: needs a CUDA GPU (it times kernels by CUDA-graph replay)", file=sys.stderr)
        return 2
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "padding": time_padding(torch, pad_shapes, args.pad_to),
              "epilogue": time_epilogue(torch, epilogue_shapes)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "family_timings.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    write_report(result, "python -m torchgen_ah.evaluation.studies.family_timings " + " ".join(
        argv if argv is not None else sys.argv[1:]), args.results)
    return 0


def write_report(result: dict, command: str, results_md: str | None) -> None:
    text = (f"Command: `{command}` ({result.get('device', '?')}, torch {result.get('torch', '?')})\n\n"
            + markdown(result))
    if results_md:
        from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section

        update_results_section(results_md, "family_timings",
                               "## Padding and epilogue fusion against cuBLAS\n\n" + text, BENCHMARK_TITLE)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
