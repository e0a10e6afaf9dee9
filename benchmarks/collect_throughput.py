"""Collection throughput: warm batched worker (``gen_data_mm``) vs one fresh Python process per input.

Both ways run the *same* measurement code (``BenchmarkRunnerMM.setup_worker`` + ``run_batch``: caches off
so every repetition re-benchmarks, ``--num-reps`` autotunings per input, the plugin's collector writing one
row per timed choice) on the same K shapes; only the process and compile strategy differs:

* ``fresh process``: a new ``python`` per input that compiles one mm ``--num-reps`` times (import torch,
  CUDA init, compile-pool start and Dynamo each time), as upstream's scripts did. Its GPU minutes are
  measured on the first ``--fresh-subset`` inputs only (GPU time is scarce) and the rate is that subset's
  inputs with all choices timed per minute;
* ``warm batched``: ``python -m torchgen_ah.mm.gen_data_mm --shapes ... --batch-size B`` on all K inputs:
  one warm worker, ``B`` inputs per compiled graph (their candidates precompile in parallel), kernels
  reused across repetitions. Its wall time includes the worker's start.

It prints inputs with all choices timed per GPU-minute (wall time on one GPU) for each way, their ratio,
and how per-choice times agree: the ratio batched / fresh of each (input, choice) median timed by both
ways, as its median and 10th-90th percentile. The shapes are drawn from the upstream distribution with all
dims <= ``--max-dim`` and one dtype (``--dtype``) so that the K inputs make full batches, as in a long
collection run where inputs are grouped by dtype.

    python benchmarks/collect_throughput.py --num-shapes 8 --num-reps 2 --batch-size 8 \
        --fresh-subset 3 --out-dir /tmp/ct

Writes its section of ``benchmarks/RESULTS.md`` (between ``<!-- BEGIN collect_throughput -->`` markers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from torchgen_ah.datagen.shape_sampler import sample_mm_input
from torchgen_ah.evaluation.results_section import BENCHMARK_TITLE, update_results_section
from torchgen_ah.evaluation.studies.run_agreement import compare, per_choice_medians, repetition_spread
from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")

SECTION = "collect_throughput"


def pick_shapes(count: int, seed: int, max_dim: int, dtypes=("bfloat16",)) -> list[dict]:
    """The first ``count`` samples of the upstream distribution with every dimension <= max_dim."""
    out, index = [], 0
    while len(out) < count:
        s = sample_mm_input(seed, index, dtypes=tuple(dtypes))
        index += 1
        if max(s.m, s.k, s.n) <= max_dim:
            out.append(s.to_dict())
    return out


def write_shapes(path: str, shapes: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n")
        for s in shapes:
            f.write(f"{s['m']},{s['k']},{s['n']},{int(s['transpose_left'])},{int(s['transpose_right'])},"
                    f"{s['dtype']},{int(s['allow_tf32'])}\n")


def plugin_env(log_path: str, space: str, sample, device: str = "cuda") -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"] = "packed_linear" if device == "cpu" else "mm"
    env["TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"] = log_path
    env["AH_PLUGIN_SEARCH_SPACE"] = space
    if sample is not None:
        env["AH_PLUGIN_SEARCH_SAMPLE"] = str(sample)
    env.pop("TORCHINDUCTOR_AUTOHEURISTIC_USE", None)
    return env


def single_sample(spec_json: str) -> int:
    """Child mode of the per-process way: one input, all reps, then exit."""
    spec = json.loads(spec_json)
    runner = BenchmarkRunnerMM()
    device = spec.get("device", "cuda")
    # upstream: no warm-up compile, Inductor's own compile subprocess pool
    args = runner.parse_args(["--device", device, "--warmup-reps", "0", "--compile-pool", "inductor"])
    runner.setup_worker(args, "cpu" if device == "cpu" else "cuda:0")
    runner.run_batch([spec["input"]], spec["reps"], args, device)
    return 0


def run_per_process(shapes, reps, log_path, space, sample, device="cuda") -> float:
    """Wall seconds of one fresh process per input, inputs in turn."""
    env = plugin_env(log_path, space, sample, device)
    start = time.perf_counter()
    for shape in shapes:
        spec = json.dumps({"input": shape, "reps": reps, "device": device})
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--single-sample", spec],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"per-process sample failed: {shape}\n{proc.stderr[-2000:]}", file=sys.stderr)
    return time.perf_counter() - start


def run_warm(shapes_path, count, reps, log_path, space, sample, batch_size, device="cuda", per_gpu=1) -> float:
    """Wall seconds of the warm worker(s) measuring all inputs in batches (worker start included).
    ``per_gpu`` > 1: that many workers share the GPU, taking turns on it (``--workers-per-gpu``; on the CPU
    the same protocol through ``--num-workers`` and ``--exclusive-timing``)."""
    env = plugin_env(log_path, space, sample, device)
    cmd = [sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--shapes", shapes_path, "-o", log_path,
           "--device", device,
           "--num-reps", str(reps), "--num-samples", str(count), "--search-space", space, "--no-progress",
           "--batch-size", str(batch_size)]
    if per_gpu > 1:
        cmd += (["--workers-per-gpu", str(per_gpu)] if device == "cuda"
                else ["--num-workers", str(per_gpu), "--exclusive-timing"])
    if sample is not None:
        cmd += ["--search-space-sample", str(sample)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    print(proc.stderr[-2000:], file=sys.stderr)
    if proc.returncode != 0:
        print(f"warm run failed (exit {proc.returncode})", file=sys.stderr)
    return seconds


def spread_line(name: str, spread) -> str:
    if not spread:
        return f"{name}: fewer than two repetitions, no rep-to-rep spread."
    return (f"{name}, rep 1 / rep 2 of the same (input, choice) over {spread['pairs']} pairs: median "
            f"{spread['median']:.3f}, 10th-90th percentile {spread['p10']:.3f}-{spread['p90']:.3f}.")


def shared_section(args, count, seconds, done, rate, warm_rate, agreement, spread) -> list[str]:
    """The lines reporting N workers sharing one GPU against one warm worker on the same K inputs."""
    lines = ["", f"**{args.shared_gpu} workers sharing the GPU** (`--workers-per-gpu {args.shared_gpu}`, turn-taking "
             "on the GPU, cores split): ", "",
             "| way | inputs measured | inputs with all choices timed | wall s | inputs / GPU-minute |",
             "| --- | --- | --- | --- | --- |",
             f"| {args.shared_gpu} warm workers per GPU, batches of {args.batch_size} | {count} | {len(done)} | "
             f"{seconds:.1f} | {rate:.2f} |", "",
             f"Throughput ratio, shared / one warm worker: **{rate / warm_rate:.2f}x**." if warm_rate > 0 else
             "Throughput ratio: one warm worker timed nothing."]
    if agreement:
        lines.append(f"Per-choice agreement, shared / one warm worker over {agreement['pairs']} (input, choice) "
                     f"medians: median {agreement['median']:.3f}, 10th-90th percentile "
                     f"{agreement['p10']:.3f}-{agreement['p90']:.3f}, 1st-99th {agreement['p1']:.3f}-"
                     f"{agreement['p99']:.3f} (a rare overlap of the two workers would show in the tails).")
    lines.append("- " + spread_line("shared", spread))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-shapes", type=int, default=8, help="K inputs measured by the batched way")
    p.add_argument("--fresh-subset", type=int, default=3,
                   help="how many of the K inputs the fresh-process way measures (its rate is estimated "
                        "from them); 0 or >= K: all")
    p.add_argument("--num-reps", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--max-dim", type=int, default=4096, help="keep shapes small so the benchmark is short")
    p.add_argument("--search-space", default="default", choices=("default", "wide"))
    p.add_argument("--search-space-sample", type=int, default=None)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: a smoke test of the script (packed_linear, tiny --max-dim), not a figure")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    p.add_argument("--shared-gpu", type=int, default=0, metavar="N",
                   help="also measure N warm workers sharing the GPU (--workers-per-gpu N), against one warm "
                        "worker: throughput ratio and per-choice agreement")
    p.add_argument("--no-fresh", action="store_true", help="skip the fresh-process way (GPU time is scarce)")
    p.add_argument("--single-sample", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.single_sample:
        return single_sample(args.single_sample)

    out_dir = args.out_dir or tempfile.mkdtemp(prefix="collect_throughput_")
    os.makedirs(out_dir, exist_ok=True)
    shapes = pick_shapes(args.num_shapes, args.seed, args.max_dim, (args.dtype,))
    subset = shapes if args.fresh_subset <= 0 else shapes[: args.fresh_subset]
    shapes_path = os.path.join(out_dir, "shapes.csv")
    write_shapes(shapes_path, shapes)
    base_log = os.path.join(out_dir, "fresh_process.txt")
    warm_log = os.path.join(out_dir, "warm_batched.txt")
    shared_log = os.path.join(out_dir, "warm_shared.txt")
    for log in (base_log, warm_log, shared_log):
        for path in (log, log + ".progress.jsonl", log + ".done.json"):
            if os.path.exists(path):
                os.remove(path)

    warm_s = run_warm(shapes_path, len(shapes), args.num_reps, warm_log, args.search_space,
                      args.search_space_sample, args.batch_size, args.device)
    base_s = 0.0 if args.no_fresh else run_per_process(
        subset, args.num_reps, base_log, args.search_space, args.search_space_sample, args.device)
    base_med, base_done = per_choice_medians(base_log)
    warm_med, warm_done = per_choice_medians(warm_log)
    base_rate = len(base_done) / (base_s / 60.0) if base_s else 0.0
    warm_rate = len(warm_done) / (warm_s / 60.0)
    agreement = compare(base_med, warm_med)
    shared_lines = []
    if args.shared_gpu > 1:
        shared_s = run_warm(shapes_path, len(shapes), args.num_reps, shared_log, args.search_space,
                            args.search_space_sample, args.batch_size, args.device, per_gpu=args.shared_gpu)
        shared_med, shared_done = per_choice_medians(shared_log)
        shared_rate = len(shared_done) / (shared_s / 60.0)
        shared_lines = shared_section(args, len(shapes), shared_s, shared_done, shared_rate, warm_rate,
                                      compare(warm_med, shared_med), repetition_spread(shared_log))

    gpu = "unknown GPU"
    try:
        import torch  # lazy: the parent only starts the measured processes; torch names the GPU here

        if torch.cuda.is_available():
            gpu = f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, Python {sys.version.split()[0]}"
    except Exception:  # noqa: BLE001
        pass
    rows = [
        "| way | inputs measured | inputs with all choices timed | wall s | inputs / GPU-minute |",
        "| --- | --- | --- | --- | --- |",
        f"| fresh process per input (upstream way) | {len(subset)} (first of the K) | {len(base_done)} | "
        f"{base_s:.1f} | {base_rate:.2f} |" if base_s else "| fresh process per input (upstream way) | "
        "not run (--no-fresh) | - | - | - |",
        f"| warm worker, batches of {args.batch_size} (gen_data_mm) | {len(shapes)} | {len(warm_done)} | "
        f"{warm_s:.1f} | {warm_rate:.2f} |",
    ]
    speedup = warm_rate / base_rate if base_rate > 0 else float("nan")
    lines = [f"{gpu}; K = {len(shapes)} shapes (seed {args.seed}, {args.dtype}, all four layouts possible, "
             f"dims <= {args.max_dim}), {args.num_reps} reps, search space {args.search_space}. "
             f"The fresh-process rate is measured on the first {len(subset)} of the K inputs.", "", *rows, "",
             f"Throughput ratio (inputs with all choices timed per GPU-minute, batched / fresh): "
             f"**{speedup:.2f}x**." if base_s else "Throughput ratio batched / fresh: not measured (--no-fresh)."]
    if args.no_fresh:
        pass
    elif agreement:
        lines.append(
            f"Per-choice time agreement, batched / fresh over {agreement['pairs']} (input, choice) medians: "
            f"median ratio {agreement['median']:.3f}, 10th-90th percentile "
            f"{agreement['p10']:.3f}-{agreement['p90']:.3f}.")
    else:
        lines.append("Per-choice time agreement: no (input, choice) pair timed by both ways.")
    lines += ["", "Noise floor of each way (agreement is within noise when it sits inside these):", "",
              *([] if args.no_fresh else ["- " + spread_line("fresh process", repetition_spread(base_log))]),
              "- " + spread_line("warm batched", repetition_spread(warm_log))]
    lines += shared_lines
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        command = "python benchmarks/collect_throughput.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        update_results_section(RESULTS, SECTION, f"## Collection throughput\n\nCommand: `{command.strip()}`\n\n{text}",
                               BENCHMARK_TITLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
