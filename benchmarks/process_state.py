"""Does what a process did before (autotuning, replay timing, other compiles) change a compiled model's step?

    python benchmarks/process_state.py --model llama_decode [--windows 20] [--json OUT.json] [--no-write]
    python benchmarks/process_state.py --from-json OUT.json    (the table of every process in OUT.json)

Fast mode and max-autotune off compile the decoder at decode to the same kernels, and in one process
(``benchmarks/step_ab.py``) they step alike, yet fast mode's fresh processes step about 5% slower than off's,
and in step_ab's process every variant, off included, steps about as slowly as fast mode's own processes.
So the process's history, not the generated code, may be what differs. Here one process compiles the model
as max-autotune off does (``mode="reduce-overhead"``, plugin off), times its step, then does one thing at a
time and times the same compiled step again:

1. ``again``: nothing (an A/A control: the step's drift within a process);
2. ``plain_compile``: compile and run another function with Inductor's defaults (no CUDA graphs);
3. ``replay_aten``: time a cuBLAS GEMM by CUDA-graph replay (``ah_plugin.replay_timing``), as fast mode's
   autotuning times aten;
4. ``off_compile``: compile and run another function with max-autotune off (``mode="reduce-overhead"``: a
   second function in the process's CUDA-graph trees);
5. ``fast_compile``: compile and run a GEMM function in fast mode (the plugin on, ``mode="max-autotune"``):
   the ranking, a Triton template compiled and timed against aten by replay;
6. ``again_end``: nothing, once more.

The step is the median of ``--windows`` windows of back-to-back steps (``torchgen_ah.e2e_models``' timing);
each row gives its ratio to the first. Writes the ``process_state_<model>`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
PHASES = ("first", "again", "plain_compile", "replay_aten", "off_compile", "fast_compile", "again_end")


def markdown(model: str, runs: list[list[dict]], device: str, command: str, torch_version: str) -> str:
    """One column per process (each its own ``rows``): step ms and its ratio to that process's first."""
    lines = [f"### {model}: one compiled step timed again after each thing a process does", "",
             f"Command: `{command}` on {device} (torch {torch_version}), {len(runs)} fresh process(es). The "
             "model is compiled once with max-autotune off; each row times that same compiled step after the "
             "row's action (actions accumulate down the table).", "",
             "| after | " + " | ".join(f"process {i + 1}: step ms (/ first)" for i in range(len(runs))) + " |",
             "| --- |" + " ---: |" * len(runs)]
    # actions accumulate, so rows keep a run's own order: the longest run's, then phases only others have
    phases = [r["phase"] for r in max(runs, key=len)]
    phases += [r["phase"] for rows in runs for r in rows if r["phase"] not in phases]
    for phase in dict.fromkeys(phases):
        cells = []
        for rows in runs:
            row = next((r for r in rows if r["phase"] == phase), None)
            cells.append("-" if row is None else f"{row['step_ms']:.4f} ({row['step_ms'] / rows[0]['step_ms']:.3f})")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def runs_from_json(path: str) -> tuple[list[list[dict]], dict]:
    """The rows of every process a ``--json`` file holds (one line each), and the first line's facts;
    ValueError naming the file and line for anything else."""
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
    return [e["rows"] for e in entries], entries[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama_decode", help="an inference model of torchgen_ah.e2e_models")
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
            runs, facts = runs_from_json(args.from_json)
        except (OSError, ValueError) as exc:
            print(f"process_state: {exc}", file=sys.stderr)
            return 2
        command = "python benchmarks/process_state.py --model " + facts["model"] + " --json FILE (per process)"
        text = markdown(facts["model"], runs, facts["device"], command, facts["torch"])
        print(text)
        if not args.no_write:
            update_results_section(args.results, f"process_state_{facts['model']}", text)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("process_state: needs a CUDA GPU (CUDA graphs and replay timing)", file=sys.stderr)
        return 2
    import torch._inductor.config as inductor_config

    import ah_plugin
    from ah_plugin.replay_timing import replay_time_ms
    from torchgen_ah.evaluation.e2e_models import KNOWN_MODELS, build_model, steps_per_window, warm_up, window_times
    from torchgen_ah.evaluation.results_section import update_results_section

    if args.model not in KNOWN_MODELS:
        print(f"process_state: unknown model {args.model!r}; known: {', '.join(KNOWN_MODELS)}", file=sys.stderr)
        return 2
    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False
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
        compiled = torch.compile(model, mode="reduce-overhead")
        step = lambda: compiled(*inputs)  # noqa: E731
        step()
        per_window = steps_per_window(warm_up(step, sync))
        for phase in PHASES:
            if phase in ("plain_compile", "off_compile"):
                f = torch.compile(other, mode="reduce-overhead" if phase == "off_compile" else None)
                for _ in range(3):
                    f(a, b if phase == "off_compile" else b[:, :4096])
            elif phase == "replay_aten":
                ms = replay_time_ms(lambda: torch.mm(a, b))
                print(f"replay-timed cuBLAS 64x2048x5632: {ms * 1000:.1f} us", flush=True)
            elif phase == "fast_compile":
                with ah_plugin.enabled(use=["mm"]):
                    f = torch.compile(gemm, mode="max-autotune")
                    for _ in range(3):
                        f(c, d)
            warm_up(step, sync)
            step_s = statistics.median(window_times(step, sync, args.windows, per_window))
            rows.append({"phase": phase, "step_ms": step_s * 1000})
            print(json.dumps(rows[-1]), flush=True)
    name = torch.cuda.get_device_name()
    command = "python benchmarks/process_state.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(args.model, [rows], name, command.strip(), torch.__version__)
    print(text)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as f:
            f.write(json.dumps({"model": args.model, "device": name, "torch": torch.__version__,
                                "steps_per_window": per_window, "rows": rows}) + "\n")
    if not args.no_write:
        update_results_section(args.results, f"process_state_{args.model}", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
