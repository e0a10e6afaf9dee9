"""Side-by-side evaluation: every autotuning policy scored on one timing table per operation.

    python -m torchgen_ah.evaluate SHAPES_FILE [--out DIR] [--reps 3] [--max-minutes 4] [--quick]
    python -m torchgen_ah.evaluate --from-run DIR        # re-score a finished run offline (any machine)

1. Timing: worker processes (``torchgen_ah.eval_worker``) autotune each shape once over default's space
   and ``--reps`` times over the searched space, with the plugin's collector writing every choice's time.
2. Table: median per (input, choice) (``torchgen_ah.evaluation.timing_table``).
3. Scores: default, the whole space, torch's built-in AutoHeuristic, the plugin at k=10 / adaptive / k=1, the
   results cache (``torchgen_ah.evaluation.policies``); regret per input against default's pick and the space's best.
4. Output under ``--out``: ``per_input.csv``, ``summary.csv``, ``evaluate.md`` (printed too), PNG plots,
   and with ``--results FILE`` the ``evaluate_gpu`` section of that markdown file.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time

import pandas as pd

import torchgen_ah.data
from ah_plugin.report import command_line
from torchgen_ah.data.ah_log import input_keys, read_log
from torchgen_ah.data.text_input import read_text
from torchgen_ah.datagen.distributed import visible_device_id
from torchgen_ah.evaluation.eval_worker import (
    LAYOUTS,
    OPS,
    SHAPE_COLUMNS,
    log_paths,
    shape_label,
    with_package_on_path,
    worker_environment,
)
from torchgen_ah.evaluation.plots import plot_evaluation
from torchgen_ah.evaluation.policies import (
    mode_name,
    builtin_ah_policy,
    cache_policy,
    check_bars,
    default_policy,
    ours_policy,
    score_policies,
    space_policy,
    summarize,
)
from torchgen_ah.evaluation.results_section import update_results_section
from torchgen_ah.evaluation.timing_table import EvaluationTimingTable, build_timing_table

DEFAULT_SHAPES = os.path.join(os.path.dirname(torchgen_ah.data.__file__), "eval_shapes.csv")
SECTION = "evaluate_gpu"
QUICK_SHAPES = 8


class ShapesError(ValueError):
    """A shapes file row that cannot be used; the message starts with "FILE:LINE: "."""


# -- shapes -------------------------------------------------------------------------------------------


def _check_row(raw: dict, path: str, line: int) -> dict:
    missing = [c for c in SHAPE_COLUMNS if c not in raw or str(raw[c]).strip() == ""]
    missing = [c for c in missing if c != "batch"]
    if missing:
        raise ShapesError(f"{path}:{line}: missing {', '.join(missing)}")
    row = {c: str(raw.get(c, "")).strip() for c in SHAPE_COLUMNS}
    if row["op"] not in OPS:
        raise ShapesError(f"{path}:{line}: op {row['op']!r} is not one of {OPS}")
    row["layout"] = row["layout"].upper()
    if row["layout"] not in LAYOUTS:
        raise ShapesError(f"{path}:{line}: layout {row['layout']!r} is not one of {LAYOUTS}")
    for dim in ("m", "k", "n", "batch"):
        text = row[dim] or ("1" if dim == "batch" else "")
        try:
            value = int(text)
        except ValueError:
            raise ShapesError(f"{path}:{line}: {dim}={text!r} is not an integer") from None
        if value < 1:
            raise ShapesError(f"{path}:{line}: {dim}={value} must be >= 1")
        row[dim] = value
    row["dtype"] = row["dtype"].replace("torch.", "")
    if row["dtype"] not in ("float16", "bfloat16", "float32"):
        raise ShapesError(f"{path}:{line}: dtype {row['dtype']!r} is not float16, bfloat16 or float32")
    return row


def read_shapes(path) -> list[dict]:
    """Shape rows from a CSV (header ``op,m,k,n,batch,dtype,layout``; ``#`` lines are comments) or a
    JSON list of objects with those keys. Raises ShapesError naming the file and line."""
    path = os.fspath(path)
    text = read_text(path, error=ShapesError)
    if path.endswith(".json") or text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise ShapesError(f"{path}:{getattr(exc, 'lineno', 1)}: not valid JSON ({exc})") from None
        if not isinstance(items, list):
            raise ShapesError(f"{path}:1: expected a JSON list of shape objects")
        return [_check_row(item, path, i + 1) for i, item in enumerate(items)]
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines())
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise ShapesError(f"{path}:1: no shapes")
    header = [c.strip() for c in lines[0][1].split(",")]
    unknown = [c for c in header if c not in SHAPE_COLUMNS]
    if unknown:
        raise ShapesError(f"{path}:{lines[0][0]}: unknown column(s) {unknown}; expected {SHAPE_COLUMNS}")
    rows = []
    for lineno, line in lines[1:]:
        values = next(csv.reader([line]))
        if len(values) != len(header):
            raise ShapesError(f"{path}:{lineno}: expected {len(header)} fields, found {len(values)}")
        rows.append(_check_row(dict(zip(header, values)), path, lineno))
    return rows


# -- timing ---------------------------------------------------------------------------------------------


def _progress(out_dir: str) -> dict[int, dict]:
    """index -> the shape's last progress entry. A shape "skipped" for lack of time counts as not done,
    so running the same command again (the folder is the state) times it."""
    path = os.path.join(out_dir, "progress.jsonl")
    done: dict[int, dict] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                done[entry["index"]] = entry
    return done


def _progress_lines(out_dir: str) -> int:
    path = os.path.join(out_dir, "progress.jsonl")
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def _finished(progress: dict[int, dict]) -> dict[int, dict]:
    return {i: e for i, e in progress.items() if e["status"] != "skipped"}


def worker_devices(device: str, workers: int) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES value per timing worker (None: leave the variable as it is, e.g. on the CPU)."""
    if device != "cuda" or workers <= 1:
        return [None] * max(1, workers)
    return [visible_device_id(g) for g in range(workers)]


def run_timing(shapes, out_dir: str, reps: int, space: str, device: str, max_minutes: float,
               sample: int | None = None, workers: int = 1) -> dict:
    """Time every shape in worker processes, ``workers`` at once (one per GPU on CUDA: shapes are dealt
    round-robin, each worker sees only its GPU and has its own Inductor cache); a crashed worker is
    restarted after the shape it died on. Returns index -> progress entry."""
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    deadline = time.time() + max_minutes * 60
    base_env = worker_environment(out_dir)
    if sample is not None:
        base_env["AH_PLUGIN_SEARCH_SAMPLE"] = str(sample)
    with_package_on_path(base_env)
    devices = worker_devices(device, workers)
    while True:
        done = _progress(out_dir)
        crashed = [i for i, e in done.items() if e["status"] == "started"]
        for index in crashed:  # a worker died inside this shape: record it and move on
            with open(os.path.join(out_dir, "progress.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"index": index, "status": "crashed", "seconds": 0.0,
                                    "error": "worker process died"}) + "\n")
        done = _finished(_progress(out_dir))
        todo = [(i, row) for i, row in enumerate(shapes) if i not in done]
        if not todo or time.time() > deadline:
            return _progress(out_dir)
        lines_before = _progress_lines(out_dir)
        procs = []
        for slot, visible in enumerate(devices):
            mine = todo[slot::len(devices)]
            if not mine:
                continue
            suffix = "" if len(devices) == 1 else str(slot)
            env = dict(base_env)
            if suffix:
                env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(out_dir, f"inductor_cache{suffix}")
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            spec = {"out_dir": out_dir, "device": device, "reps": reps, "space": space,
                    "deadline": deadline, "shapes": mine}
            spec_path = os.path.join(out_dir, f"worker_spec{suffix}.json")
            with open(spec_path, "w", encoding="utf-8") as f:
                json.dump(spec, f)
            log = open(os.path.join(out_dir, f"worker{suffix}.log"), "a", encoding="utf-8")
            procs.append((subprocess.Popen([sys.executable, "-m", "torchgen_ah.evaluation.eval_worker", spec_path],
                                           env=env, stdout=log, stderr=subprocess.STDOUT), log))
        codes = []
        for proc, log in procs:
            codes.append(proc.wait())
            log.close()
        if _progress_lines(out_dir) == lines_before:  # no worker got to any shape (e.g. failed at import)
            print(f"error: timing workers exited with {codes} before starting a shape; see "
                  f"{os.path.join(out_dir, 'worker*.log')}", file=sys.stderr)
            return _progress(out_dir)


# -- tables and scores ----------------------------------------------------------------------------------


def build_tables(shapes, out_dir: str) -> dict[str, EvaluationTimingTable]:
    """One timing table per operation from the run's logs; inputs labelled by their shape row."""
    by_op: dict[str, tuple[list, list, dict]] = {}
    for index, row in enumerate(shapes):
        default_log, searched_log = log_paths(out_dir, index, row["op"])
        if not (os.path.exists(default_log) and os.path.exists(searched_log)):
            continue
        searched, defaults, labels = by_op.setdefault(row["op"], ([], [], {}))
        searched.append(searched_log)
        defaults.append(default_log)
        log = read_log(default_log)
        default_keys = set(input_keys(log.frame, log.metadata))
        for key in default_keys:
            labels[key] = shape_label(row)
        log = read_log(searched_log)
        for key in set(input_keys(log.frame, log.metadata)) - default_keys:
            labels.setdefault(key, f"{shape_label(row)}, logged as {key}")
    # the collector logs each op under its own name; group by the name in the files
    return {op: build_timing_table(s, d, labels) for op, (s, d, labels) in by_op.items()}


def policies_for(table: EvaluationTimingTable, artifact_dir: str | None) -> list:
    policies = [default_policy(), space_policy()]
    if table.metadata.get("name") == "mm":
        policies.append(builtin_ah_policy(table.metadata))
    for k in (10, "adaptive", 1):
        policies.append(ours_policy(k, table.metadata, artifact_dir=artifact_dir))
    policies.append(ours_policy(1, table.metadata, artifact_dir=artifact_dir, alone=True))
    policies.append(cache_policy(table.first_pick))
    return policies


# -- report ---------------------------------------------------------------------------------------------


def _fmt(value, digits=3) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "inf"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(frame: pd.DataFrame, columns: list[str], digits=3) -> str:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for record in frame[columns].to_dict("records"):
        lines.append("| " + " | ".join(_fmt(record[c], digits) for c in columns) + " |")
    return "\n".join(lines)


SUMMARY_COLUMNS = ["policy", "inputs", "mean_benchmarked", "benchmarked_share", "gmean_vs_default",
                   "max_vs_default", "worse_2pct", "worse_10pct", "gmean_vs_best", "max_vs_best", "fallbacks"]


def render_report(command: str, environment: dict, results: dict, bars: dict, extra: list[str]) -> str:
    """The markdown written to evaluate.md and the RESULTS.md section."""
    env = environment or {}
    lines = [
        f"Command: `{command}`",
        "",
        f"Device: {env.get('gpu') or env.get('device', '?')}; torch {env.get('torch', '?')}; "
        f"triton {env.get('triton') or 'n/a'}; host {platform.node() or '?'}",
        "",
        "Regret = time of the kernel a policy ends with (the fastest, by median, of the choices it "
        "benchmarks) / time of default max-autotune's pick; `_vs_best`: / the best of the searched "
        "space. `benchmarked`: choices autotuned per input (one choice: none); share: of default's.",
    ]
    for op, (summary, per_input) in results.items():
        lines += ["", f"### {op}: {per_input['input'].nunique()} inputs", "",
                  markdown_table(summary, SUMMARY_COLUMNS, 4)]
        lines += ["", "Bars:"] + [
            f"- {'PASS' if b.passed else 'FAIL' if b.passed is False else 'N/A '} {b.name}: {b.detail}"
            for b in bars.get(op, [])
        ]
    lines += extra
    return "\n".join(lines) + "\n"


def _load_json(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def score_run(shapes, out_dir: str, artifact_dir=None, compile_cost=None, quality_policy="plugin_k10"):
    """Tables, per-input scores, summaries and bars for a finished timing run, and per op the labels of
    the inputs the tables left out (see ``EvaluationTimingTable.left_out``)."""
    results, bars, left_out = {}, {}, {}
    gpu = (_load_json(os.path.join(out_dir, "environment.json")) or {}).get("gpu")
    for op, table in build_tables(shapes, out_dir).items():
        if gpu and gpu != "cpu":  # logs do not carry the device name; device-specific artifacts need it
            table.metadata.setdefault("device_name", gpu)
        table.save(os.path.join(out_dir, "timing", op))
        left_out[op] = [table.label(key) for key in table.left_out]
        per_input = score_policies(table, policies_for(table, artifact_dir))
        summary = summarize(per_input)
        results[op] = (summary, per_input)
        cost = (compile_cost or {}).get(op, {}) if compile_cost else {}
        bars[op] = check_bars(summary, quality_policy=quality_policy,
                              autotune_seconds=cost.get("autotune_seconds"),
                              compile_seconds=cost.get("compile_seconds"))
    return results, bars, left_out


def main(argv=None) -> int:
    parser = command_line.parser("python -m torchgen_ah.evaluate", __doc__.split("\n")[0])
    parser.add_argument("shapes", nargs="?", default=DEFAULT_SHAPES,
                        help="CSV or JSON shapes file (default: torchgen_ah/data/eval_shapes.csv, 34 mm shapes)")
    parser.add_argument("--out", default="eval_out", help="output folder (logs, tables, report)")
    parser.add_argument("--reps", type=int, default=3, help="searched-space autotunings per shape")
    parser.add_argument("--space", default="wide", choices=("default", "wide"),
                        help="the searched space (AH_PLUGIN_SEARCH_SPACE of the repetitions)")
    parser.add_argument("--sample", type=int, default=None,
                        help="extra wide-space configs timed per input (AH_PLUGIN_SEARCH_SAMPLE)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available, else cpu)")
    parser.add_argument("--workers", type=int, default=1,
                        help="timing workers at once; on CUDA one per GPU (the first N visible GPUs)")
    parser.add_argument("--max-minutes", type=float, default=4.0,
                        help="timing budget; shapes not started by then are skipped and reported")
    parser.add_argument("--quick", action="store_true",
                        help=f"first {QUICK_SHAPES} shapes, 2 repetitions")
    parser.add_argument("--from-run", action="store_true",
                        help="do not time: re-score the logs already in --out")
    parser.add_argument("--artifact-dir", default=None,
                        help="folder of the artifacts to rank with (default: the installed package's)")
    parser.add_argument("--compile-cost", default=None,
                        help="JSON from torchgen_ah.compile_cost (autotune seconds for the bars)")
    parser.add_argument("--e2e", action="append", default=[],
                        help="markdown from torchgen_ah.e2e_models to include (repeat for several runs)")
    parser.add_argument("--quality-policy", default="plugin_k10", type=mode_name,
                        help="the policy whose regret and autotune time the report's quality bar checks: "
                             "plugin_k10 (the plugin's ranking, its top 10 and aten), plugin_adaptive, plugin_k1")
    parser.add_argument("--results", default=None, help=f"markdown file whose {SECTION} section to update")
    parser.add_argument("--no-plots", action="store_true",
                        help="no evaluate_<op>.png figures (they need matplotlib)")
    args = parser.parse_args(argv)

    try:
        shapes = read_shapes(args.shapes)
    except (OSError, ShapesError) as exc:
        return command_line.fail("evaluate", exc, 2)
    reps = args.reps
    if args.quick:
        shapes, reps = shapes[:QUICK_SHAPES], min(reps, 2)
    os.makedirs(args.out, exist_ok=True)
    if not args.from_run:
        device = args.device
        if device is None:
            import torch  # lazy: only to pick the device; the timing runs in worker processes

            device = "cuda" if torch.cuda.is_available() else "cpu"
        run_timing(shapes, args.out, reps, args.space, device, args.max_minutes, args.sample, args.workers)

    progress = _progress(args.out)
    results, bars, left_out = score_run(shapes, args.out, args.artifact_dir, _load_json(args.compile_cost),
                              args.quality_policy)
    extra = []
    missing = [(i, e) for i, e in sorted(progress.items()) if e["status"] != "ok"]
    if missing:
        extra += ["", f"Shapes without timings ({len(missing)} of {len(shapes)}):"]
        extra += [f"- {shape_label(shapes[i])}: {e['status']} {e['error']}" for i, e in missing if i < len(shapes)]
    unlogged = [shape_label(row) for i, row in enumerate(shapes) if progress.get(i, {}).get("status") == "ok"
                and not all(os.path.exists(p) for p in log_paths(args.out, i, row["op"]))]
    if unlogged:
        extra += ["", f"Shapes run but never autotuned by Inductor ({len(unlogged)}; no choices to score: "
                  "Inductor lowers them without a template choice, e.g. M=1 as a matrix-vector product):"]
        extra += [f"- {label}" for label in unlogged]
    for op, labels in left_out.items():
        if labels:
            extra += ["", f"{op} inputs left out of the scores ({len(labels)}): logged only by the "
                      "searched-space runs, never by default's autotuning, so there is no default pick to "
                      "compare with (Inductor's pad_mm padded the shape in those runs):"]
            extra += [f"- {label}" for label in labels]
    for path in args.e2e:
        if os.path.exists(path):
            extra += ["", open(path, encoding="utf-8").read().rstrip()]
        else:
            print(f"warning: --e2e {path}: no such file; left out of the report", file=sys.stderr)
    for op, (summary, per_input) in results.items():
        per_input.to_csv(os.path.join(args.out, f"per_input_{op}.csv"), index=False)
        summary.to_csv(os.path.join(args.out, f"summary_{op}.csv"), index=False)
        if not args.no_plots:
            seconds = ((_load_json(args.compile_cost) or {}).get(op) or {}).get("autotune_seconds")
            png = os.path.join(args.out, f"evaluate_{op}.png")
            plot_evaluation(summary, per_input, png, autotune_seconds=seconds, title=op)
            extra += ["", f"![{op} regret]({os.path.relpath(png, os.path.dirname(os.path.abspath(args.results)) if args.results else args.out)})"]
    command = "python -m torchgen_ah.evaluate " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    report = render_report(command, _load_json(os.path.join(args.out, "environment.json")), results, bars, extra)
    with open(os.path.join(args.out, "evaluate.md"), "w", encoding="utf-8") as f:
        f.write(report)
    if args.results:
        update_results_section(args.results, SECTION, report)
    print(report)
    if not results:
        print("error: no timings were collected (see worker.log in the output folder)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
