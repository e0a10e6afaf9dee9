"""Does what a process did before (autotuning, replay timing, other compiles) change a compiled model's step?

    python benchmarks/process_state.py --model llama_decode [--first off|fast] [--windows 20] [--json OUT.json]
    python benchmarks/process_state.py --from-json OUT.json    (the table of every process in OUT.json)

A compiled model's step can depend on what else its process did, not only on its generated code: fast
mode and max-autotune off compile the decoder at decode to the same kernels, yet fast mode's fresh processes
stepped about 5% slower than off's while its replay timing captured on a stream of its own (on the H200, GPU
work on a side stream after a model's CUDA graph was recorded slows that graph by about 5% for the rest of the
process; RESULTS.md ``process_state_llama_decode``). Here one process compiles the model
(``--first off``: as max-autotune off does, ``mode="reduce-overhead"`` with the plugin off; ``--first fast``:
``mode="max-autotune"`` with the plugin as the environment sets it, as a fast-mode process does), times its
step, then does one thing at a time and times the same compiled step again:

1. ``again``: nothing (an A/A control: the step's drift within a process);
2. ``plain_compile``: compile and run another function with Inductor's defaults (no CUDA graphs);
3. ``replay_aten``: time a cuBLAS GEMM by CUDA-graph replay (``ah_plugin.replay_timing``), as fast mode's
   autotuning times aten;
4. ``off_compile``: compile and run another function with max-autotune off (``mode="reduce-overhead"``: a
   second function in the process's CUDA-graph trees);
5. ``fast_compile``: compile and run a GEMM function in fast mode (the plugin on, ``mode="max-autotune"``):
   the ranking, a Triton template compiled and timed against aten by replay;
6. ``again_end``: nothing, once more;
7. ``gc_freeze``: ``gc.freeze()``: every object alive now is left out of Python's later collections.

``--phases`` runs others, in its order (``first`` always comes first), among them some that split a replay
timing into parts: ``side_stream`` (a cuBLAS GEMM run on a new stream, nothing captured), ``side_add`` (an
elementwise op on a new stream), ``tree_stream_add`` (the same on the side stream of the process's CUDA-graph
trees), ``capture_add`` (an elementwise op captured into a CUDA graph of its own on a
new stream, replayed, freed; no cuBLAS), ``clear_workspaces`` (cuBLAS's per-stream workspaces freed, as
Inductor's CUDA-graph trees do around each recording) and ``empty_cache`` (the allocator's cached blocks
returned to the driver).

Each row holds the step (the median of ``--windows`` windows of back-to-back steps, ``torchgen_ah.e2e_models``'
timing) and its ratio to the first, and beside it what might explain a change: the same windows timed with
Python's garbage collector paused (``nogc_ms``), the host's time to launch one step (``host_us``: the call
returns before the GPU is done), the objects the collector tracks, and the functions in the process's CUDA-graph
trees. Writes the ``process_state_<model>`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
PHASES = ("first", "again", "plain_compile", "replay_aten", "off_compile", "fast_compile", "again_end", "gc_freeze")
# phases only --phases runs: which part of a replay timing (a second stream running cuBLAS, a capture) matters
PROBES = ("side_stream", "side_add", "tree_stream_add", "capture_add", "clear_workspaces", "empty_cache")
HOST_CALLS = 50  # single synchronized calls whose launch time gives host_us
# what the tables show of each row, after the step itself: (key, heading, format)
EXTRA_COLUMNS = (("nogc_ms", "step ms with the garbage collector paused (/ first)", "ratio"),
                 ("graph_ms", "the model's CUDA graph replayed alone, ms (/ first)", "ratio"),
                 ("host_us", "host us to launch one step", "{:.1f}"),
                 ("gc_objects", "objects tracked by the garbage collector", "{:,}"),
                 ("graph_functions", "functions in the CUDA-graph trees", "{}"))


def capture_elementwise(torch, x) -> None:
    """Capture ``x + 1`` ten times into a CUDA graph of its own on a new stream, replay it, free it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        x + 1  # warm up the kernel outside the capture
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin()
        for _ in range(10):
            x + 1
        graph.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    del graph


def timed_state(torch, step, sync, windows: int, per_window: int, graph=None) -> dict:
    """The step timed now (windows as e2e_models times them), the same with the garbage collector paused,
    the host's launch time of one step, the model's CUDA graph replayed alone (``graph``), and the process
    facts beside them."""
    from ah_plugin.inductor import graph_trees
    from torchgen_ah.evaluation.e2e_models import warm_up, window_times

    warm_up(step, sync)
    step_s = statistics.median(window_times(step, sync, windows, per_window))
    launches = []
    for _ in range(HOST_CALLS):
        sync()
        start = time.perf_counter()
        step()
        launches.append(time.perf_counter() - start)
    sync()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        nogc_s = statistics.median(window_times(step, sync, windows, per_window))
    finally:
        if was_enabled:
            gc.enable()
    graph_s = None if graph is None else statistics.median(window_times(graph.replay, sync, windows, per_window))
    return {"step_ms": step_s * 1000, "nogc_ms": nogc_s * 1000, "host_us": statistics.median(launches) * 1e6,
            "graph_ms": None if graph_s is None else graph_s * 1000,
            "gc_objects": len(gc.get_objects()), "graph_functions": graph_trees.function_count()}


def _table(runs: list[list[dict]], phases: list[str], key: str, fmt: str) -> list[str]:
    """Rows of one field per phase, one column per process ("ratio": the value and its ratio to that
    process's first row); "-" where a process has no such phase or field."""
    lines = []
    for phase in phases:
        cells = []
        for rows in runs:
            row = next((r for r in rows if r["phase"] == phase), None)
            if row is None or row.get(key) is None:
                cells.append("-")
            elif fmt == "ratio":
                base = rows[0].get(key)
                cells.append(f"{row[key]:.4f}" + (f" ({row[key] / base:.3f})" if base else ""))
            else:
                cells.append(fmt.format(row[key]))
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return lines


def markdown(model: str, runs: list[list[dict]], device: str, command: str, torch_version: str,
             firsts: list[str] | None = None) -> str:
    """One column per process (each its own ``rows``): step ms and its ratio to that process's first, then
    a table per explaining field the runs recorded. ``firsts``: how each process compiled the model."""
    firsts = firsts or ["off"] * len(runs)
    heads = [f"process {i + 1} ({first})" for i, first in enumerate(firsts)]
    lines = [f"### {model}: one compiled step timed again after each thing a process does", "",
             f"Command: `{command}` on {device} (torch {torch_version}), {len(runs)} fresh process(es). The "
             "model is compiled once, as each column's heading says (off: max-autotune off; fast: fast mode); "
             "each row times that same compiled step after the row's action (actions accumulate down the "
             "table).", ""]
    # actions accumulate, so rows keep a run's own order: the longest run's, then phases only others have
    phases = [r["phase"] for r in max(runs, key=len)]
    phases += [r["phase"] for rows in runs for r in rows if r["phase"] not in phases]
    phases = list(dict.fromkeys(phases))
    for key, heading, fmt in (("step_ms", "step ms (/ first)", "ratio"),) + EXTRA_COLUMNS:
        if not any(r.get(key) is not None for rows in runs for r in rows):
            continue
        lines += [f"{heading[0].upper()}{heading[1:]}:", "",
                  "| after | " + " | ".join(heads) + " |", "| --- |" + " ---: |" * len(runs)]
        lines += _table(runs, phases, key, fmt) + [""]
    return "\n".join(lines)


def runs_from_json(path: str) -> tuple[list[list[dict]], dict, list[str]]:
    """The rows of every process a ``--json`` file holds (one line each), the first line's facts, and how
    each process compiled the model ("off" where a line does not say); ValueError naming the file and line
    for anything else."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not (entry["rows"] and all({"phase", "step_ms"} <= set(r) for r in entry["rows"])):
                    raise ValueError("a run without phases")
                entry["model"], entry["device"], entry["torch"]  # noqa: B018 (the table's facts)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a process_state run ({exc!r})") from None
            entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: no runs")
    return [e["rows"] for e in entries], entries[0], [e.get("first", "off") for e in entries]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama_decode", help="an inference model of torchgen_ah.e2e_models")
    parser.add_argument("--first", choices=("off", "fast"), default="off",
                        help="how the model is compiled: max-autotune off (plugin off), or mode=\"max-autotune\" "
                             "with the plugin the environment sets (TORCHINDUCTOR_AUTOHEURISTIC_USE=mm: fast mode)")
    parser.add_argument("--phases", default=",".join(PHASES[1:]),
                        help=f"comma-separated, in order, after first: of {', '.join(PHASES[1:] + PROBES)} "
                             "(default: %(default)s)")
    parser.add_argument("--windows", type=int, default=20, help="timed windows per phase")
    parser.add_argument("--json", default=None, help="also write the figures here (appended, one line per run)")
    parser.add_argument("--results", default=RESULTS, help="markdown file whose process_state_<model> section is "
                        "written (default: benchmarks/RESULTS.md)")
    parser.add_argument("--no-write", action="store_true", help="do not write a results section")
    parser.add_argument("--from-json", default=None, metavar="FILE",
                        help="no GPU work: the table of every process a --json file holds")
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    if args.from_json:
        from torchgen_ah.evaluation.results_section import update_results_section

        try:
            runs, facts, firsts = runs_from_json(args.from_json)
        except (OSError, ValueError) as exc:
            print(f"process_state: {exc}", file=sys.stderr)
            return 2
        command = "python benchmarks/process_state.py --model " + facts["model"] + " --json FILE (per process)"
        text = markdown(facts["model"], runs, facts["device"], command, facts["torch"], firsts)
        print(text)
        if not args.no_write:
            update_results_section(args.results, f"process_state_{facts['model']}", text)
        return 0
    phases = ["first"] + [p.strip() for p in args.phases.split(",") if p.strip() and p.strip() != "first"]
    unknown = [p for p in phases if p not in PHASES + PROBES]
    if unknown:
        print(f"process_state: unknown phase {', '.join(unknown)}; known: {', '.join(PHASES + PROBES)}",
              file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("process_state: needs a CUDA GPU (CUDA graphs and replay timing)", file=sys.stderr)
        return 2
    import ah_plugin
    from ah_plugin.inductor import compile_tools, graph_trees
    from torchgen_ah.evaluation.e2e_models import KNOWN_MODELS, build_model, steps_per_window, warm_up
    from torchgen_ah.evaluation.results_section import update_results_section

    if args.model not in KNOWN_MODELS:
        print(f"process_state: unknown model {args.model!r}; known: {', '.join(KNOWN_MODELS)}", file=sys.stderr)
        return 2
    compile_tools.set_options(fx_graph_cache=False, autotune_local_cache=False)
    if args.first == "fast":
        plugin = ah_plugin.require_active_from_environment()
        if not plugin["installed"] or "mm" not in plugin["settings"].use:
            print("process_state: --first fast needs the plugin on for mm: run with "
                  "TORCHINDUCTOR_AUTOHEURISTIC_USE=mm", file=sys.stderr)
            return 2
    else:
        ah_plugin.uninstall()
    model, inputs, train = build_model(torch, args.model, "cuda")
    if train:
        print("process_state: inference models only", file=sys.stderr)
        return 2
    sync = torch.cuda.synchronize
    a = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2048, 5632, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(128, 768, device="cuda", dtype=torch.bfloat16)  # 128x768x2: the H200 ranking puts a
    d = torch.randn(768, 2, device="cuda", dtype=torch.bfloat16)  # template first, timed against aten

    def other(x, y):
        return torch.relu(x @ y)

    def gemm(x, y):
        return (x @ y) * 2.0

    rows = []
    with torch.no_grad():
        compiled = torch.compile(model, mode="max-autotune" if args.first == "fast" else "reduce-overhead")
        step = lambda: compiled(*inputs)  # noqa: E731
        step()
        per_window = steps_per_window(warm_up(step, sync))
        graph = graph_trees.first_graph()  # the model's
        for phase in phases:
            if phase in ("plain_compile", "off_compile"):
                f = torch.compile(other, mode="reduce-overhead" if phase == "off_compile" else None)
                for _ in range(3):
                    f(a, b if phase == "off_compile" else b[:, :4096])
            elif phase == "replay_aten":
                ms = compile_tools.replay_time_ms(lambda: torch.mm(a, b))
                print(f"replay-timed cuBLAS 64x2048x5632: {ms * 1000:.1f} us", flush=True)
            elif phase == "fast_compile":
                with ah_plugin.enabled(use=["mm"]):
                    f = torch.compile(gemm, mode="max-autotune")
                    for _ in range(3):
                        f(c, d)
            elif phase == "gc_freeze":
                gc.freeze()
            elif phase == "side_stream":
                with torch.cuda.stream(torch.cuda.Stream()):
                    for _ in range(10):
                        torch.mm(a, b)
                sync()
            elif phase == "side_add":
                with torch.cuda.stream(torch.cuda.Stream()):
                    for _ in range(10):
                        a + 1
                sync()
            elif phase == "tree_stream_add":
                with torch.cuda.stream(graph_trees.capture_stream(create=True)):
                    for _ in range(10):
                        a + 1
                sync()
            elif phase == "clear_workspaces":
                torch._C._cuda_clearCublasWorkspaces()
            elif phase == "empty_cache":
                torch.cuda.empty_cache()
            elif phase == "capture_add":
                capture_elementwise(torch, a)
            rows.append({"phase": phase, **timed_state(torch, step, sync, args.windows, per_window, graph)})
            print(json.dumps(rows[-1]), flush=True)
    name = torch.cuda.get_device_name()
    command = "python benchmarks/process_state.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(args.model, [rows], name, command.strip(), torch.__version__, [args.first])
    print(text)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(json.dumps({"model": args.model, "device": name, "torch": torch.__version__, "first": args.first,
                                "steps_per_window": per_window, "rows": rows}) + "\n")
    if not args.no_write:
        update_results_section(args.results, f"process_state_{args.model}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
