"""Decoding with a static KV cache across models, batches and contexts: per (model, batch, context) the modes
compiled in one process and timed with interleaved rounds (``kv_decode.run``), tokens/s, time per output
token, time to first token and the share of the weight-streaming roofline.

    python -m torchgen_ah.evaluation.studies.kv_matrix [--styles llama,qwen2,mistral,moe] [--batches 1,8,32]
        [--contexts 512,2048] [--attention sdpa|flex] [--layers 2]
        [--modes off,off_frozen,fast,quality,default] [--slow-at 8:2048] [--rounds 7] [--budget-s 500]
        [--json OUT.json] [--skip-measured EARLIER.json ...] [--results benchmarks/RESULTS.md]
    python -m torchgen_ah.evaluation.studies.kv_matrix --combine A.json B.json [--results benchmarks/RESULTS.md]

The models are ``decoder_styles.STYLES`` (each at its named model's widths, ``--layers`` layers). A point's
decode step is one token per sequence half way through a cache of ``context`` positions; its prefill (the time
to first token) a prompt of min(512, context / 2) tokens. ``default`` and ``default_flex`` take minutes of
autotuning per point, so they run only at the ``--slow-at`` points (batch:context; ``all`` for every point).
Each point's figures are written to ``--json`` as soon as it is timed, so a run stopped by its time limit
keeps what it measured; a point starts only while the budget holds it (1.2x the longest point so far).
``--skip-measured`` leaves out the points an earlier run's ``--json`` measured, so a second device call
measures only what the first one's budget cut; ``--combine`` reports both files together.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
import time

from torchgen_ah.evaluation.studies import decoder_styles, kv_decode
from torchgen_ah.evaluation.zoo_worker import geometric_mean

SECTION = "kv_decode_matrix"
SLOW_MODES = ("default", "default_flex")
#: the CPU tests' widths: the styles' kinds (biases, tied head, experts) at a size a CPU compiles in seconds
TINY = {"dim": 64, "heads": 4, "kv_heads": 2, "hidden": 128, "vocab": 128}


def _numbers(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} takes whole numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{flag} takes positive whole numbers, got {text!r}")
    return values


def _slow_points(text: str) -> set | None:
    """``--slow-at``: None for every point, else the set of (batch, context)."""
    if text.strip() == "all":
        return None
    points = set()
    for item in text.split(","):
        try:
            batch, context = (int(v) for v in item.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--slow-at takes BATCH:CONTEXT pairs or 'all', got {item!r}") from None
        points.add((batch, context))
    return points


def points(styles: list[str], batches: list[int], contexts: list[int]) -> list[tuple[str, int, int]]:
    """The matrix's (style, batch, context) in the order they run: by context (the first given first, so a
    budget cut keeps every model at it), then style, then batch."""
    return [(s, b, c) for c in contexts for s in styles for b in batches]


def _point_args(args, style: str, batch: int, context: int, spent_s: float) -> argparse.Namespace:
    slow = args.slow_at is None or (batch, context) in args.slow_at
    modes = [m for m in args.modes if slow or m not in SLOW_MODES]
    return argparse.Namespace(
        attention=args.attention, batch=batch, context=context, prompt=None, layers=args.layers, style=style,
        dim=None, vocab=None, modes=modes, rounds=args.rounds, budget_s=args.budget_s, spent_s=spent_s,
        hbm_tbs=args.hbm_tbs, device=args.device, overrides=TINY if args.tiny else {})


def _cpu_time_ms(fn, calls: int = 3) -> float:
    """Wall milliseconds per call on the CPU (the tests' stand-in for CUDA-graph replay)."""
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def run(args) -> list[dict]:
    """Every point of the matrix, each as ``kv_decode.run`` reports it; ``--json`` rewritten after each."""
    import torch

    started = time.perf_counter()
    runs, longest = [], 0.0
    done = getattr(args, "measured", set())
    grid = points(args.styles, args.batches, args.contexts)
    todo = [p for p in grid if p not in done]
    if len(todo) < len(grid):
        print(f"kv_matrix: {len(grid) - len(todo)} of its points were measured before and are left out; {len(todo)} to measure",
              flush=True)
    for number, (style, batch, context) in enumerate(todo, 1):
        spent = time.perf_counter() - started
        if runs and args.budget_s - spent < 1.2 * longest:
            left = ", ".join(f"{s} b{b} c{c}" for s, b, c in todo[number - 1:])
            print(f"kv_matrix: budget reached; not measured: {left}", flush=True)
            runs.append({"skipped_points": todo[number - 1:]})
            break
        print(f"kv_matrix: [{number}/{len(todo)}] {style} batch {batch} context {context} "
              f"({spent:.0f} s spent)", flush=True)
        point = _point_args(args, style, batch, context, spent)
        began = time.perf_counter()
        time_ms = _cpu_time_ms if args.device == "cpu" else None
        try:
            runs.append(kv_decode.run(point, time_ms=time_ms))
        except Exception as exc:  # one point's failure (the GPU's memory, a compile) ends that point only
            why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            print(f"kv_matrix: {style} batch {batch} context {context} failed: {why}", flush=True)
            runs.append({"failed_point": [style, batch, context], "error": why})
        longest = max(longest, time.perf_counter() - began)
        torch.compiler.reset()  # each point recompiles the same code objects: stay under Dynamo's cache limit
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
        if args.json:
            _write(args.json, runs)
    return runs


def _write(path: str, runs: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"runs": runs}, handle, indent=1, allow_nan=False)


def report(runs: list[dict], command: str, note: str | None = None) -> str:
    """The ``kv_decode_matrix`` section: a row per (model, batch, context), the modes against off."""
    measured, repeats = [], []
    for r in (r for r in runs if "results" in r):  # a point measured again on its GPU: the first is kept
        key = (*measured_point(r), r.get("device"))
        (repeats if key in {(*measured_point(m), m.get("device")) for m in measured} else measured).append(r)
    seen = {measured_point(r) for r in measured}
    failed = [r for r in runs if "failed_point" in r and tuple(r["failed_point"]) not in seen]
    seen |= {tuple(r["failed_point"]) for r in failed}
    skipped = list(dict.fromkeys(tuple(p) for r in runs for p in r.get("skipped_points", []) if tuple(p) not in seen))
    if not measured:
        return "## Decoding with a KV cache, model by model\n\nNo point was measured."
    first = measured[0]
    config = first["config"]
    modes = []
    for r in measured:
        modes += [m for m in r["config"]["modes"] if m != "off" and m not in modes]
    devices = sorted({r["device"] for r in measured})
    several = len(devices) > 1  # a GPU column, and each GPU's bandwidth named
    measured.sort(key=_row_order)
    bandwidth = ", ".join(dict.fromkeys(
        f"{r['config']['hbm_tbs']} TB/s" + (f" ({gpu_name(r['device'])})" if several else "")
        for r in sorted(measured, key=lambda r: r["device"])))
    lines = [
        "## Decoding with a KV cache, model by model",
        "",
        f"Command: `{command}` on {', '.join(devices)} (torch {first['torch']}).",
        "",
        *([note, ""] if note else []),
        f"Decoders of {config['layers']} layers at the widths of the named models (`decoder_styles.py`: llama = "
        "TinyLlama-1.1B, qwen2 = Qwen2-1.5B, mistral = Mistral-7B, moe = 8 experts, top 2, at llama's width, every "
        f"expert run on every token), {config['attention'].upper()} attention over a static cache, bf16. Per point "
        "the modes are compiled in one process and timed by CUDA-graph replay in "
        f"{config['rounds']} interleaved rounds (median). Decode: one token per sequence at position context/2; "
        "TTFT: the prefill of a prompt of min(512, context/2) tokens. Roofline share: the bytes a step must read "
        f"(weights, a mixture's routed experts, the valid KV cache) at {bandwidth} over off's step. "
        "Mode cells: decode step x off (prefill x off); spread: off's decode max/min - 1 over the rounds.",
        "",
        "| model | batch | context | " + ("GPU | " if several else "") + "off ms/token | off tokens/s | roofline "
        "share | off TTFT ms | spread | " + " | ".join(modes) + " |",
        "| --- | ---: | ---: |" + (" --- |" if several else "") + " ---: | ---: | ---: | ---: | ---: |"
        + " ---: |" * len(modes),
    ]
    ratios = {m: [] for m in modes}
    compile_x = {m: [] for m in modes}
    same_code = {m: [] for m in modes}  # per point where both recorded it: whether the mode generated off's code
    off_compile, worst_diff = [], {}
    for r in measured:
        c, results = r["config"], r["results"]
        off = results.get("off", {})
        point = f"| {c['style']} | {c['batch']} | {c['context']} | " + (f"{gpu_name(r['device'])} | " if several else "")
        if "decode_ms" not in off:
            lines.append(f"{point}off: {off.get('skipped', '?')[:80]} |")
            continue
        off_compile.append(sum(off["compile_s"].values()))
        cells = []
        for m in modes:
            res = results.get(m)
            if res is None:
                cells.append("")
            elif "decode_ms" not in res:
                cells.append("not compiled")
            else:
                x = res["decode_ms"] / off["decode_ms"]
                ratios[m].append(x)
                compile_x[m].append(sum(res["compile_s"].values()) / off_compile[-1])
                worst_diff[m] = max(worst_diff.get(m, 0.0), res["max_diff"])
                if res.get("code") and off.get("code"):
                    same_code[m].append((f"{c['style']} b{c['batch']} c{c['context']}", res["code"] == off["code"]))
                prefill = f" ({res['prefill_ms'] / off['prefill_ms']:.3f})" if "prefill_ms" in res else ""
                cells.append(f"{x:.3f}{prefill}")
        share = off.get("roofline_share")
        lines.append(
            f"{point}{off['decode_ms']:.3f} | {off['tokens_per_s']:.0f} | "
            f"{'-' if share is None else f'{share:.0%}'} | {off.get('prefill_ms', float('nan')):.2f} | "
            f"{off['decode_spread']:.0%} | " + " | ".join(cells) + " |")
    lines += ["", "Over the points each mode ran (geometric means): "
              + "; ".join(f"{m} decode {geometric_mean(ratios[m]):.3f}x off (range {min(ratios[m]):.3f}-"
                          f"{max(ratios[m]):.3f}), compile {geometric_mean(compile_x[m]):.2f}x off's "
                          f"({len(ratios[m])} points)" for m in modes if ratios[m])
              + (f". Off compiled prefill + decode in {min(off_compile):.1f}-{max(off_compile):.1f} s. Compile is "
                 "the first calls in the shared process, where a mode compiled after off finds off's kernels "
                 "compiled: the ratios rank the modes' own work, they are not fresh-process ratios."
                 if off_compile else "."),
              *_code_lines(same_code),
              "", "Largest difference of a mode's decode logits from off's: "
              + ", ".join(f"{m} {v:.0e}" for m, v in worst_diff.items()) + "."]
    if repeats:
        lines += ["", "Measured again in a later file (the first measurement is the row): " + "; ".join(
            f"{s} b{b} c{c}" + (f" on {gpu_name(r['device'])}" if several else "") + " (" + ", ".join(f"{m} {res['decode_ms'] / r['results']['off']['decode_ms']:.3f}"
                                          for m, res in r["results"].items() if m != "off" and "decode_ms" in res
                                          and "decode_ms" in r["results"].get("off", {})) + ")"
            for r in repeats for s, b, c in [measured_point(r)]) + "."]
    if failed:
        lines += ["", "Failed: " + "; ".join(f"{s} b{b} c{c} ({r['error'][:160]})"
                                           for r in failed for s, b, c in [r["failed_point"]]) + "."]
    if skipped:
        lines += ["", "Not measured (the budget ran out): "
                  + ", ".join(f"{s} b{b} c{c}" for s, b, c in skipped) + "."]
    return "\n".join(lines)


def gpu_name(device: str) -> str:
    """A GPU's short name for a table cell: ``NVIDIA H100 80GB HBM3`` -> ``H100``."""
    words = device.replace("NVIDIA", "").split()
    return words[0] if words else device


def _row_order(run_figures: dict) -> tuple:
    """Rows by context (longest first), then model in the styles' order, then batch: files measured in several
    calls read as one table."""
    style, batch, context = measured_point(run_figures)
    known = list(decoder_styles.STYLES)
    return -context, known.index(style) if style in known else len(known), style, batch, run_figures.get("device", "")


def _code_lines(same_code: dict) -> list[str]:
    """Per mode, at how many points it generated off's very code (there its step can differ from off's only
    by noise), naming the points where it did not; nothing for runs that did not record the code."""
    parts = []
    for mode, found in same_code.items():
        if found:
            other = [point for point, same in found if not same]
            parts.append(f"{mode} at {len(found) - len(other)} of {len(found)}"
                         + (f" (not at {', '.join(other)})" if other else ""))
    return ["", "Off's very code (the generated code's hash equal to off's): " + "; ".join(parts) + "."] if parts else []


def measured_point(run_figures: dict) -> tuple[str, int, int]:
    """The (style, batch, context) of one measured point of a ``--json`` file."""
    config = run_figures["config"]
    return config["style"], config["batch"], config["context"]


def read_runs(paths: list[str]) -> list[dict]:
    """The runs of these ``--json`` files, in order; a file that is not one is named in the error."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                found = json.load(handle)["runs"]
            for r in found:
                if "results" in r:
                    measured_point(r)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a kv_matrix --json file ({exc!r})") from None
        runs += found
    return runs


def main(argv=None) -> int:
    from ah_plugin.report import command_line
    from torchgen_ah.evaluation.results_section import publish_report

    parser = command_line.parser("python -m torchgen_ah.evaluation.studies.kv_matrix", __doc__.splitlines()[0])
    parser.add_argument("--styles", default="llama,qwen2,mistral,moe")
    parser.add_argument("--batches", type=lambda t: _numbers(t, "--batches"), default=[1, 8, 32])
    parser.add_argument("--contexts", type=lambda t: _numbers(t, "--contexts"), default=[512, 2048])
    parser.add_argument("--attention", choices=("flex", "sdpa"), default="sdpa")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--modes", default="off,off_frozen,fast,quality,default")
    parser.add_argument("--slow-at", type=_slow_points, default=_slow_points("8:2048"),
                        help="BATCH:CONTEXT points where default and default_flex run, or 'all'")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=500.0, help="no point starts after the budget")
    parser.add_argument("--hbm-tbs", type=float, default=None,
                        help="HBM bandwidth in TB/s (default: from the GPU's name)")
    parser.add_argument("--json", help="write the figures here (after every point)")
    parser.add_argument("--results", help="write the table as a section of this markdown file")
    parser.add_argument("--skip-measured", nargs="+", metavar="JSON", default=[],
                        help="leave out the points these earlier --json files measured")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="report on these runs' --json files together (no GPU needed)")
    parser.add_argument("--note", help="with --combine: a paragraph printed under the command (how the runs were made)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    words = list(argv if argv is not None else sys.argv[1:])
    if args.combine:  # the command that rewrites the section: the files and where, the note shown beneath it
        words = ["--combine", *args.combine] + (["--results", args.results] if args.results else [])
    command = "python -m torchgen_ah.evaluation.studies.kv_matrix " + shlex.join(words)
    try:
        earlier = read_runs(args.combine or args.skip_measured)
    except ValueError as exc:
        return command_line.fail("kv_matrix", exc)
    if args.combine:
        return publish_report(report(earlier, command, args.note), {"runs": earlier}, SECTION, None, args.results)
    if args.json and any(os.path.realpath(args.json) == os.path.realpath(p) for p in args.skip_measured):
        parser.error(f"--json {args.json} is also given to --skip-measured: the run would overwrite the points it "
                     "leaves out (write to a new file and --combine both)")
    # a point counts as measured only under this run's attention and layers (another's is another model)
    args.measured = {measured_point(r) for r in earlier if "results" in r
                     and (r["config"].get("attention"), r["config"].get("layers")) == (args.attention, args.layers)}
    args.styles = [s.strip() for s in args.styles.split(",") if s.strip()]
    unknown = [s for s in args.styles if s not in decoder_styles.STYLES]
    if unknown:
        parser.error(f"unknown styles {', '.join(unknown)}; known: {', '.join(decoder_styles.STYLES)}")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in kv_decode.MODES]
    if bad:
        parser.error(f"unknown modes {', '.join(bad)}; known: {', '.join(kv_decode.MODES)}")
    if args.modes[0] != "off":
        parser.error("the first mode must be off (the others are judged against it)")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        return command_line.fail("kv_matrix", RuntimeError("needs a CUDA GPU (times by CUDA-graph replay)"))
    runs = run(args)
    return publish_report(report(runs, command), {"runs": runs}, SECTION, args.json, args.results)


if __name__ == "__main__":
    sys.exit(main())
