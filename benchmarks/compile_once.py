"""How often fast mode compiles each kept template, and what a second compile costs (H200).

    python benchmarks/compile_once.py [--shapes 128x768x2,...] [--reps 2] [--json OUT.json] [--sources DIR]
                                      [--no-write]

Fast mode times a kept Triton template against aten; to time it, Inductor compiles the template in a
benchmark module, and when it wins the compiled graph renders it again under a unique name, which Triton
compiled a second time until ``AH_PLUGIN_COMPILE_ONCE`` (ah_plugin/inductor/patches/compile_once.py). Per
repetition this runs, each in a fresh process with empty Inductor and Triton caches:

- ``off``: max-autotune off (``torch.compile`` without a mode);
- ``fast``: fast mode (``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm``), compile-once on (the default);
- ``fast_twice``: fast mode with ``AH_PLUGIN_COMPILE_ONCE=off``.

Each process first compiles an unrelated function (the one-time costs), then compiles one function that
runs every shape's GEMM (bf16, ``mode="max-autotune-no-cudagraphs"`` for the fast variants) and times its
first call: the whole compile, GEMM autotuning included. The Triton kernels compiled are counted from the
Triton cache by name (``triton_mm``: a benchmark module's template; ``triton_tem_*``: the graph's own
template kernels) and the outputs are checked against eager. The default shapes are the evaluation GEMMs on
which fast mode kept a template over cuBLAS on the H200. Needs a GPU. Prints a markdown table and writes
the ``compile_once`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
DEFAULT_SHAPES = "128x768x2,13x1000x4099,3x4096x12288,16x4096x32000"
VARIANTS = ("off", "fast", "fast_twice")
SECTION = "compile_once"
LEGEND = ("Compile s: the first call of the GEMM function (its compile, autotuning included), after an "
          "unrelated warm-up compile. Template binaries, from the Triton cache: benchmark = compiled in a "
          "benchmark module to be timed (`triton_mm`); graph's own = compiled again for the compiled graph "
          "(`triton_tem_*`). Worst relative error: the largest |compiled - eager| over the largest |eager|, "
          "over the outputs.")


def variant_env(variant: str, work: str) -> tuple[dict, str | None]:
    """(environment, torch.compile mode) of one variant, with empty cache folders under ``work``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AH_PLUGIN_") and not k.startswith("TORCHINDUCTOR_AUTOHEURISTIC")}
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(work, "triton")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if variant == "off":
        env["AH_PLUGIN_DISABLE"] = "1"
        return env, None
    env["TORCHINDUCTOR_AUTOHEURISTIC_USE"] = "mm"
    if variant == "fast_twice":
        env["AH_PLUGIN_COMPILE_ONCE"] = "off"
    elif variant != "fast":
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    return env, "max-autotune-no-cudagraphs"


def triton_kernels(triton_dir: str) -> dict:
    """{kernel name: how many binaries} in a Triton cache folder (one ``<name>.json`` per compiled kernel)."""
    out: dict = {}
    for root, _dirs, files in os.walk(triton_dir):
        for name in files:
            if name.endswith(".json") and not name.startswith("__grp__"):
                kernel = name[:-len(".json")]
                out[kernel] = out.get(kernel, 0) + 1
    return out


def template_counts(kernels: dict) -> dict:
    """The template binaries among ``triton_kernels``: benchmark modules' and the graph's own."""
    benchmark = sum(n for k, n in kernels.items() if k in ("triton_mm", "triton_bmm", "triton_addmm")
                    or k.startswith("triton_mm_"))
    graph = sum(n for k, n in kernels.items() if k.startswith("triton_tem_"))
    return {"benchmark_binaries": benchmark, "graph_template_binaries": graph}


def child(shapes: list, mode: str | None) -> dict:
    """In the measured process: compile the GEMMs as one function, time the first call, check, report."""
    import time

    import torch

    warm = torch.compile(lambda x: (x * 2).sum())
    warm(torch.randn(64, device="cuda"))
    torch.cuda.synchronize()
    pairs = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
              torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for m, k, n in shapes]

    def gemms(*tensors):
        return tuple(tensors[i] @ tensors[i + 1] for i in range(0, len(tensors), 2))

    flat = [t for pair in pairs for t in pair]
    compiled = torch.compile(gemms, mode=mode, dynamic=False) if mode else torch.compile(gemms, dynamic=False)
    start = time.perf_counter()
    got = compiled(*flat)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    want = gemms(*flat)
    worst = max(float((g.float() - w.float()).abs().max() / (w.float().abs().max() + 1e-6)) for g, w in zip(got, want))
    out = {"compile_s": seconds, "worst_relative_error": worst}
    try:
        import ah_plugin

        out["plugin_status"] = {k: v for k, v in ah_plugin.status().items() if k == "compile_once"}
    except Exception:
        pass
    return out


def run_variant(variant: str, shapes: list, rep: int, sources: str | None) -> dict:
    """One fresh process of ``variant``: its child's report plus the Triton kernels it compiled."""
    work = tempfile.mkdtemp(prefix=f"compile_once_{variant}_")
    try:
        env, mode = variant_env(variant, work)
        text = ",".join(f"{m}x{k}x{n}" for m, k, n in shapes)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", text, "--mode", mode or ""],
                              env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{variant} rep {rep} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        kernels = triton_kernels(env["TRITON_CACHE_DIR"])
        report.update(variant=variant, rep=rep, shapes=text, kernels=kernels, **template_counts(kernels))
        if sources:
            _copy_sources(env["TORCHINDUCTOR_CACHE_DIR"], os.path.join(sources, f"{variant}_rep{rep}"))
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _copy_sources(inductor_dir: str, dest: str) -> None:
    """The Python files of template kernels (benchmark modules and the graph's) and the graph's wrapper."""
    os.makedirs(dest, exist_ok=True)
    for root, _dirs, files in os.walk(inductor_dir):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            try:
                text = open(path, encoding="utf-8").read()
            except (OSError, UnicodeDecodeError):
                continue
            if "triton_heuristics.template" in text or "async_compile.triton(" in text:
                shutil.copy(path, os.path.join(dest, name + ".txt"))  # .txt: the device batch packs text files


def read_rows(path: str) -> list:
    """The reports of a ``--json`` file; ValueError naming the file and line of a bad one."""
    from torchgen_ah.evaluation.json_lines import read_json_lines

    rows = read_json_lines(path, ("variant", "rep", "compile_s", "benchmark_binaries", "graph_template_binaries",
                                  "worst_relative_error"), "a compile_once report")
    if not rows:
        raise ValueError(f"{path}: no reports")
    return rows


def table(rows: list) -> str:
    """Medians per variant over repetitions."""
    lines = ["| variant | processes | compile s (median) | template binaries: benchmark | graph's own | "
             "worst relative error |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        if not mine:
            continue
        lines.append(f"| {variant} | {len(mine)} | {statistics.median(r['compile_s'] for r in mine):.2f} | "
                     f"{statistics.median(r['benchmark_binaries'] for r in mine):g} | "
                     f"{statistics.median(r['graph_template_binaries'] for r in mine):g} | "
                     f"{max(r['worst_relative_error'] for r in mine):.3g} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxKxN,... compiled together in one function")
    parser.add_argument("--reps", type=int, default=2, help="fresh processes per variant (interleaved)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", help="write every process's report here")
    parser.add_argument("--sources", help="copy each process's template kernel sources under this folder")
    parser.add_argument("--from-json", help="no run: the table (and RESULTS.md section) of a --json file")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from torchgen_ah.evaluation.studies.family_timings import parse_shapes

    if args.child is not None:
        print(json.dumps(child(parse_shapes(args.child), args.mode or None)))
        return 0
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    if args.from_json:
        try:
            rows = read_rows(args.from_json)
        except (OSError, ValueError) as exc:
            print(f"compile_once: {exc}", file=sys.stderr)
            return 2
    else:
        import torch

        if not torch.cuda.is_available():
            print("compile_once: needs a CUDA GPU (Triton templates are compiled for one); "
                  "--from-json tabulates saved reports without one", file=sys.stderr)
            return 2
        rows = []
    for rep in range(0 if args.from_json else args.reps):
        for variant in variants:
            row = run_variant(variant, shapes, rep, args.sources if rep == 0 else None)
            print(json.dumps({k: row[k] for k in ("variant", "rep", "compile_s", "benchmark_binaries",
                                                  "graph_template_binaries", "worst_relative_error")}), flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    text = table(rows)
    print(text)
    if not args.no_write:
        from torchgen_ah.evaluation.results_section import update_results_section

        source = (f"Rows of `{args.from_json}`, measured by `python benchmarks/compile_once.py --reps "
                  f"{max(r['rep'] for r in rows) + 1} --json ...`" if args.from_json else
                  "Command: `python benchmarks/compile_once.py " + " ".join(argv or sys.argv[1:]) + "`")
        update_results_section(RESULTS, SECTION, f"### Kept templates: compiled once or twice (H200)\n\n"
                               f"{source}; shapes {rows[0]['shapes'] if rows else args.shapes}, compiled together "
                               f"in one function, each variant in a fresh process per repetition.\n\n{text}\n\n{LEGEND}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
