"""One model compiled several ways in one process, step times interleaved: differences of a percent or two.

    python benchmarks/step_ab.py --model llama_prefill [--variants off,fast,fast_no_l2,aten_gemm,off_plugin,off_again]
        [--windows 30] [--copies 1] [--code-dir DIR] [--json OUT.json] [--results FILE.md | --no-write]

Fresh processes of one mode differ in step time by about 3% on an H200, so comparing two modes by one
process each cannot resolve a 2% gap. Here every variant is compiled in the same process on the same
weights, and the timed windows alternate between variants (the order rotating each round), so drift hits
all alike. A window lasts at least 20 ms of the fastest variant's steps, after a second of warm-up steps
per variant (``torchgen_ah.e2e_models``' timing). Variants (CUDA graphs on a GPU, as the modes run):

- ``off``: max-autotune off (``mode="reduce-overhead"``), plugin off;
- ``fast``: ``mode="max-autotune"`` with the plugin's fast mode (``ah_plugin.enabled(use=["mm"])``);
- ``fast_no_l2``: fast mode with ``AH_PLUGIN_L2_RULE=off``: templates are timed against aten on memory-bound
  GEMMs within L2 too (does their replay-measured win show in the step?);
- ``aten_gemm``: the Inductor options fast mode leaves (``max_autotune_gemm``, CUDA graphs) with aten as
  the only GEMM backend, plugin off: fast mode's lowering without the plugin;
- ``off_plugin``: max-autotune off with the plugin switched on (its passes, no autotuning);
- ``off_again``: ``off`` compiled once more, last by default: an A/A control. Where it and ``off`` step
  apart, the order of compiling (where each CUDA-graph pool lands) moves steps by that much; compare
  other variants only beyond it, and reorder ``--variants`` to check.

On an H200 two compiled copies of identical code stepped 1-2% apart (up to 5%), consistently within a
process and either way between processes. ``--copies N`` compiles every variant N times (``fast#2``, ...,
in rounds: all variants, then all again) and adds a table of each variant's median over its copies and
their range, which averages that spread out instead of reading it as a difference between variants.

Each variant's generated code goes to ``--code-dir`` (one file per graph); the table counts its generated
kernels and extern calls and shows a hash of the code without comments (variants with one hash ran the
same kernels), so a step-time gap can be traced to what was generated. Compile seconds are
printed but are not whole-compile times: the variants share one process, imports and warm caches.
FX-graph and autotune caches are off so that every variant lowers for real. Prints a markdown table and
writes the ``step_ab`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from torchgen_ah.evaluation import one_process

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
VARIANTS = ("off", "fast", "fast_no_l2", "aten_gemm", "off_plugin", "off_again")


def parse_variants(text: str) -> list[str]:
    """Comma-separated variant names, each known, at least one."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    if not names:
        raise ValueError("no variant given")
    return names


def plugin_state(ah_plugin) -> dict:
    """What the plugin's settings say now (recorded per variant, and checked against what it needs)."""
    from ah_plugin.config import settings

    current = settings.current()
    return {"installed": bool(ah_plugin.status().get("installed")), "use": sorted(current.use),
            "l2_rule": current.l2_rule}


def expected_use(variant: str) -> tuple[list, bool]:
    """(USE ops, l2_rule) a variant must compile under."""
    if variant in ("fast", "off_plugin"):
        return ["mm"], True
    if variant == "fast_no_l2":
        return ["mm"], False
    return [], True


def variant_scope(ah_plugin, variant: str):
    """The plugin's state for ``variant``: switched on for the fast variants and off_plugin, else untouched."""
    import contextlib

    if variant == "fast_no_l2":
        return ah_plugin.enabled(use=["mm"], l2_rule=False)
    return ah_plugin.enabled(use=["mm"]) if variant in ("fast", "off_plugin") else contextlib.nullcontext()


# a copy's options carry neutral keys (``one_process.NEUTRAL_KEYS``), so that Dynamo, which reuses a graph
# compiled for a backend comparing equal, compiles each copy afresh
MAX_COPIES = len(one_process.NEUTRAL_KEYS) + 1


def variant_compile_args(variant: str, cuda: bool) -> dict:
    """``torch.compile``'s mode or options for ``variant`` (call under ``variant_scope``: the mode's options
    are read when ``torch.compile`` is called, the ranking when the first call lowers)."""
    if variant in ("off", "off_again"):
        return {"mode": "reduce-overhead" if cuda else None}
    if variant == "off_plugin":
        # off's options spelled out, with one more key at its default value: Dynamo reuses a compiled graph
        # for a backend that compares equal, and the plugin's passes must run for this variant
        return {"options": {"triton.cudagraphs": cuda, "triton.cudagraph_trees": True}}
    if variant == "fast":
        return {"mode": "max-autotune" if cuda else "max-autotune-no-cudagraphs"}
    if variant == "fast_no_l2":
        # fast mode's own options (as the plugin narrows the mode), plus a key at its default value so that
        # Dynamo does not hand this variant the graph compiled for ``fast``
        from ah_plugin.inductor import compile_tools

        options = dict(compile_tools.mode_options("max-autotune" if cuda else "max-autotune-no-cudagraphs"))
        options["triton.cudagraph_trees"] = True
        return {"options": options}
    return {"options": {"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN", "triton.cudagraphs": cuda}}


def compile_variant(torch, model, variant: str, cuda: bool, copy: int = 0):
    """``torch.compile`` of ``model`` as ``variant`` runs it; ``copy`` > 0 compiles the same once more (its
    options spelled out plus ``copy`` neutral keys). Call it under ``variant_scope``."""
    args = variant_compile_args(variant, cuda)
    if copy:
        from ah_plugin.inductor import compile_tools

        mode = args.get("mode")
        options = dict(args.get("options") or (compile_tools.mode_options(mode) if mode else {}))
        options.update(one_process.neutral_options(copy))
        args = {"options": options}
    dynamic = {"dynamic": False} if variant == "off_again" else {}  # a backend unequal to off's
    return torch.compile(model, **args, **dynamic)


def labels(variants: list[str], copies: int) -> list[tuple[str, str, int]]:
    """(label, variant, copy) in compile order: every variant once, then every variant again, ..."""
    return [(v if c == 0 else f"{v}#{c + 1}", v, c) for c in range(copies) for v in variants]


def markdown(model: str, rows: list[dict], device: str, command: str, torch_version: str, per_window: int) -> str:
    base = next((r for r in rows if r["variant"] == "off"), rows[0])
    lines = [f"### {model}: variants in one process, step windows interleaved", "",
             f"Command: `{command}` on {device} (torch {torch_version}). Step = median over the windows of "
             f"{per_window} back-to-back steps, after a second of warm-up steps per variant; the windows of all "
             "variants alternate. Compile s is the "
             "first call in this shared process (not a fresh-process compile time).", "",
             f"| variant | compile s | step ms | step / {base['variant']} | generated kernels | extern calls | code |",
             "| --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        ext = ", ".join(f"{k} {v}" for k, v in r["code"]["extern_calls"].items()) or "-"
        lines.append(f"| {r['variant']} | {r['compile_seconds']:.1f} | {r['step_ms']:.4f} | "
                     f"{r['step_ms'] / base['step_ms']:.4f} | {r['code']['kernels']} | {ext} | "
                     f"{(r['code'].get('fingerprint') or '-')[:8]} |")
    lines += ["", "Code: a hash of the generated code without its comments; variants with the same hash ran the "
                  "same kernels."]
    return "\n".join(lines + copies_lines(rows))


def copies_lines(rows: list[dict]) -> list[str]:
    """With ``--copies``: each variant's step as the median over its compiled copies, their range, and the
    ratio to off's (empty with one copy each)."""
    bases = list(dict.fromkeys(r.get("base", r["variant"]) for r in rows))
    steps = {b: [r["step_ms"] for r in rows if r.get("base", r["variant"]) == b] for b in bases}
    if all(len(v) == 1 for v in steps.values()):
        return []
    ref = "off" if "off" in steps else bases[0]
    ref_ms = statistics.median(steps[ref])
    lines = ["", "Over the compiled copies (the spread of identical code is the range within a row):", "",
             f"| variant | copies | step ms, median | range ms | step / {ref} |", "| --- | ---: | ---: | --- | ---: |"]
    for b in bases:
        med = statistics.median(steps[b])
        lines.append(f"| {b} | {len(steps[b])} | {med:.4f} | {min(steps[b]):.4f}-{max(steps[b]):.4f} | "
                     f"{med / ref_ms:.4f} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama_prefill", help="a model of torchgen_ah.e2e_models")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    parser.add_argument("--windows", type=int, default=30, help="timed windows per variant")
    parser.add_argument("--copies", type=int, default=1, help="compile each variant this many times (label "
                        "VARIANT#2, ...): copies of identical code step apart by a percent or two, so a "
                        "variant's step is the median over its copies")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--code-dir", default=None, help="write each variant's generated code here")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--results", default=RESULTS, help="markdown file whose step_ab_<model> section is "
                        "written (default: benchmarks/RESULTS.md)")
    parser.add_argument("--no-write", action="store_true", help="do not write a results section")
    args = parser.parse_args(argv)
    try:
        variants = parse_variants(args.variants)
        if args.windows < 1:
            raise ValueError(f"--windows must be at least 1, got {args.windows}")
        if not 1 <= args.copies <= MAX_COPIES:
            raise ValueError(f"--copies must be 1 to {MAX_COPIES}, got {args.copies}")
    except ValueError as exc:
        print(f"step_ab: {exc}", file=sys.stderr)
        return 2
    outside = sorted(k for k in os.environ if (k.startswith("AH_PLUGIN_") and k != "AH_PLUGIN_VERBOSE")
                     or k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC_", "AH_TUNABLE_")))
    if outside:
        print(f"step_ab: unset {', '.join(outside)}: the environment wins over each variant's plugin settings, "
              "so the variants would not be what they are named", file=sys.stderr)
        return 2
    import torch

    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from ah_plugin.inductor.generated_code_capture import first_call_with_code
    from torchgen_ah.evaluation.e2e_models import KNOWN_MODELS, build_model, steps_per_window, warm_up
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary
    from torchgen_ah.evaluation.results_section import update_results_section

    if args.model not in KNOWN_MODELS:
        print(f"step_ab: unknown model {args.model!r}; known: {', '.join(KNOWN_MODELS)}", file=sys.stderr)
        return 2
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device == "cuda"
    compile_tools.set_options(fx_graph_cache=False, autotune_local_cache=False)
    compiles = labels(variants, args.copies)
    compile_tools.allow_recompiles(4 * len(compiles))
    ah_plugin.uninstall()
    model, inputs, train = build_model(torch, args.model, device)
    if train:
        print("step_ab: inference models only (a training step's outputs feed back into the next)", file=sys.stderr)
        return 2

    def sync():
        if cuda:
            torch.cuda.synchronize()

    rows, steps, per_step = [], {}, {}
    with torch.no_grad():
        reference = model(*inputs).float()
        for label, variant, copy in compiles:
            with variant_scope(ah_plugin, variant):
                state = plugin_state(ah_plugin)
                if (state["use"], state["l2_rule"]) != expected_use(variant):
                    print(f"step_ab: {variant} would compile with the plugin's use={state['use']}, "
                          f"l2_rule={state['l2_rule']}; it needs {expected_use(variant)}", file=sys.stderr)
                    return 1
                compiled = compile_variant(torch, model, variant, cuda, copy)
                sync()
                start = time.perf_counter()
                graphs = compile_tools.dynamo_graph_count()
                out, codes = first_call_with_code(compiled, inputs)
                sync()
                seconds = time.perf_counter() - start
            if not codes and compile_tools.dynamo_graph_count() == graphs:
                print(f"step_ab: {label} reused a graph compiled before instead of compiling its own", file=sys.stderr)
                return 1
            err = (out.float() - reference).abs().max().item() / max(reference.abs().max().item(), 1e-6)
            if args.code_dir:
                os.makedirs(args.code_dir, exist_ok=True)
                for i, code in enumerate(codes):
                    with open(os.path.join(args.code_dir, f"{args.model}_{label.replace('#', '_copy')}_{i}.code.txt"),
                              "w", encoding="utf-8") as f:
                        f.write(code)
            graphs = compile_tools.dynamo_graph_count()
            steps[label] = lambda c=compiled: c(*inputs)
            per_step[label] = warm_up(steps[label], sync)
            if one_process.recompiled(graphs, f"{label}'s warm-up", "step_ab"):
                return 1
            rows.append({"variant": label, "base": variant, "copy": copy + 1, "compile_seconds": seconds,
                         "max_rel_err": err, "plugin": state,
                         "code": {**code_summary(codes), "fingerprint": code_fingerprint(codes)}})
            print(json.dumps(rows[-1]), flush=True)
        graphs = compile_tools.dynamo_graph_count()
        per_window = steps_per_window(min(per_step.values()))
        windows = one_process.interleaved_windows(steps, args.windows, sync, per_window)
        if one_process.recompiled(graphs, "the timed windows", "step_ab"):
            return 1
    for r in rows:
        r["step_ms"] = statistics.median(windows[r["variant"]]) * 1000
        r["windows_ms"] = [w * 1000 for w in windows[r["variant"]]]
    name = torch.cuda.get_device_name() if cuda else "the CPU"
    command = "python benchmarks/step_ab.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(args.model, rows, name, command.strip(), torch.__version__, per_window)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"model": args.model, "device": name, "torch": torch.__version__, "steps_per_window": per_window,
                       "rows": rows}, f, indent=1)
    if not args.no_write:
        update_results_section(args.results, f"step_ab_{args.model}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
