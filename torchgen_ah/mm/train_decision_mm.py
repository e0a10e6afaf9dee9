"""The mm ranking heuristic: upstream's CLI, mm's derived features and defaults, on the generic trainer.

    python -m torchgen_ah.mm.train_decision_mm datasets/a100/a100_mm.txt --heuristic-name MMRankingA100 \\
        --ranking 10 --save-dot --data train_timm datasets/a100/a100_timm_train_mm.txt \\
        --data train_hf datasets/a100/a100_hf_train_mm.txt

writes _MMRankingA100.py in the current folder (or ``--out DIR``; the installed package's artifact folder
only with ``--into-package``), + .dot with --save-dot, + .report.md with the metrics table.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass

import pandas as pd

from ah_plugin.report import command_line
from torchgen_ah.training import codegen
from torchgen_ah.training.output_folder import FLAG as INTO_PACKAGE, output_folder
from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log
from torchgen_ah.data.heldout import HOLDOUTS
from torchgen_ah.data.log_files import log_stem
from torchgen_ah.data.merge import metadata_differences
from torchgen_ah.training.train_decision import (
    GRIDS,
    FeatureSpec,
    MedianTimeMatrix,
    TrainResult,
    metrics_markdown,
    median_time_matrix,
    require_usable,
)
from torchgen_ah.training.estimator import RankingTrainer

DEFAULT_CHOICE = "extern_mm"
#: each extra dataset counts this many times (upstream appended TIMM and HF three times each)
EXTRA_WEIGHT = 3.0

#: upstream's derived mm features (those of torch's shipped mm heuristics); expressions read floats, see FeatureSpec
MM_DERIVED = [
    ("m*k", 'x["m"] * x["k"]'),
    ("m*n", 'x["m"] * x["n"]'),
    ("k*n", 'x["k"] * x["n"]'),
    ("arith_intensity", 'x["m"] * x["k"] * x["n"] / (x["m"] * x["k"] + x["k"] * x["n"] + x["m"] * x["n"])'),
]

#: how far each operand's leading dimension is from 16-byte alignment in 2-byte elements (residue mod 8;
#: the stride that is not 1, as stride_0 + stride_1 - 1 for a dense operand; an operand with a size-1
#: dimension or no unit stride gets a value that means nothing, and fp32 aligns at 4). cuBLAS takes a slow
#: path on unaligned operands (128x768x2: 6.7 us against a Triton template's 4.3 on an H200). On the H200
#: replay logs they take fast mode's held-out result from 0.942x to 0.927x cuBLAS's time; opt-in
#: (--alignment-features) so artifacts trained without them stay as they are
ALIGNMENT_DERIVED = [
    ("mat1_align", '(x["mat1_stride_0"] + x["mat1_stride_1"] - 1) % 8'),
    ("mat2_align", '(x["mat2_stride_0"] + x["mat2_stride_1"] - 1) % 8'),
]

#: the features the derived ones are computed from: a log without them is not a GEMM log
MM_FEATURES = ("m", "k", "n")


def require_mm_features(metadata: dict, path: str) -> None:
    """ValueError naming the file when its log has no m, k, n columns (a packed_linear or other op's log)."""
    missing = [f for f in MM_FEATURES if f not in metadata.get("numerical_features", ())]
    if missing:
        raise ValueError(
            f"{path}:1: a {metadata.get('name', '?')!r} log, not an mm log (no {', '.join(missing)} "
            f"column{'s' if len(missing) > 1 else ''}); train it with `python -m torchgen_ah.train_generic "
            f"{path} --heuristic-name NAME`")


def load_table(path: str | list[str], name: str, weight: float = 1.0) -> tuple[MedianTimeMatrix, dict]:
    """Parse one log, or several of one device and timing method (as if merged: an input in two of them
    gets the median of all its rows), and reduce it to its (input x choice) median-time table."""
    paths = [path] if isinstance(path, str) else list(path)
    logs = []
    for each in paths:
        log = read_log(each)
        require_mm_features(log.metadata, each)
        if logs:
            _check_same_device(logs[0].metadata, log.metadata, each)
        logs.append(log)
    metadata = logs[0].metadata
    frame = pd.concat([log.frame for log in logs], ignore_index=True) if len(logs) > 1 else logs[0].frame
    table = median_time_matrix(frame, feature_columns(metadata), name, weight, keys=input_keys(frame, metadata))
    rows = len(frame) + sum(len(log.skipped) for log in logs)
    return require_usable(table, ", ".join(paths), rows), metadata


def mm_feature_spec(metadata: dict, alignment: bool = False) -> FeatureSpec:
    derived = MM_DERIVED + (ALIGNMENT_DERIVED if alignment else [])
    return FeatureSpec(list(metadata["numerical_features"]), list(metadata["categorical_features"]), derived)


def _check_same_device(main_md: dict, other_md: dict, path: str) -> None:
    keys = ("name", "device_capa", "shared_memory", "numerical_features", "categorical_features", "timing")
    diff = metadata_differences(main_md, other_md, keys)
    if diff:
        raise ValueError(f"{path}:1: metadata differs from the main dataset's in {', '.join(diff)}")


@dataclass
class RunOutput:
    result: TrainResult
    artifact_path: str
    report_path: str
    dot_path: str | None
    seconds: float


def run(main_path: str | list[str], heuristic_name: str, *, ranking: int = 10,
        data: list[tuple[str, str]] = (), out_dir: str = ".", save_dot: bool = False,
        holdout: str = "none", device_names: tuple[str, ...] = (), grid: dict | None = None,
        alignment: bool = False, command: str = "", log=print) -> RunOutput:
    """Train the mm ranking heuristic and write its artifact, report (and DOT)."""
    start = time.perf_counter()
    main_paths = [main_path] if isinstance(main_path, str) else list(main_path)
    main_name = "+".join(log_stem(path) for path in main_paths)
    main, metadata = load_table(main_paths, main_name)
    extras = []
    for name, path in data:
        table, md = load_table(path, name, EXTRA_WEIGHT)
        _check_same_device(metadata, md, path)
        extras.append(table)
    log(f"parsed {1 + len(extras)} file(s) in {time.perf_counter() - start:.1f} s: "
        + ", ".join(f"{t.name} {len(t.keys)} inputs x {len(t.choices)} choices" for t in [main] + extras))
    trainer = RankingTrainer(k=ranking, default=DEFAULT_CHOICE, holdout=holdout, grid=grid, log=log)
    result = trainer.fit(main, extras, mm_feature_spec(metadata, alignment)).result_

    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"_{heuristic_name}")
    sources = [f"{main_name} ({', '.join(os.path.basename(p) for p in main_paths)})"] + [
        f"{n} ({os.path.basename(p)}, x{EXTRA_WEIGHT:g})" for n, p in data]
    src = trainer.to_artifact(heuristic_name, metadata, device_names=device_names, command=command, sources=sources)
    with open(base + ".py", "w") as f:
        f.write(src)
    dot_path = None
    if save_dot:
        dot_path = base + ".dot"
        with open(dot_path, "w") as f:
            f.write(codegen.generate_dot(result.model, heuristic_name))
    report = report_markdown(result, heuristic_name, ranking, holdout, command)
    with open(base + ".report.md", "w") as f:
        f.write(report)
    log(report)
    return RunOutput(result, base + ".py", base + ".report.md", dot_path, time.perf_counter() - start)


def report_markdown(result: TrainResult, heuristic_name: str, k: int, holdout: str, command: str) -> str:
    """The metrics table and how it was made (no timings: same data and flags, same bytes)."""
    lines = [f"# {heuristic_name}: training report", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [f"Top-k lists: the first {k} choices of the ranking that have a time for the input, plus "
              f"`{DEFAULT_CHOICE}`. Hit: the list holds the fastest time; regret: best time in the list / "
              f"best time; near hit: within 1%; top-1: the first choice with a time. Hold-out: `{holdout}`.",
              "", f"Chosen grid point: `{result.best_params}`", "",
              metrics_markdown(result.metrics), "", "Grid (4-fold cross-validation by input: sha1(key) % 5 in 1..4):", "",
              "| point | validation score (miss rate + mean log top-1 regret) |", "| --- | --- |"]
    lines += [f"| `{p}` | {s:.5f} |" for p, s in result.grid]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = command_line.parser(
        "python -m torchgen_ah.mm.train_decision_mm",
        "Train a ranking decision tree for mm kernel choices and emit it as a Python artifact "
        "(_NAME.py, _NAME.report.md, and _NAME.dot with --save-dot) in the current folder or --out DIR.",
    )
    parser.add_argument("dataset", nargs="+",
                        help="main AutoHeuristic log (e.g. datasets/a100/a100_mm.txt); several logs of one device "
                             "and timing method train as one (their inputs' rows pooled)")
    parser.add_argument("--heuristic-name", required=True, type=codegen.heuristic_name,
                        help="class name, e.g. MMRankingA100")
    parser.add_argument("--ranking", type=int, default=10, metavar="K",
                        help="top-k size the lists are tuned and scored for")
    parser.add_argument("--data", nargs=2, action="append", default=[], metavar=("NAME", "FILE"),
                        help="extra dataset for training only (weight 3); repeatable")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: the current folder; the installed package's artifact "
                             f"folder is refused unless {INTO_PACKAGE} is given)")
    parser.add_argument(INTO_PACKAGE, action="store_true",
                        help="write into the installed package's artifact folder (ah_plugin.artifacts), where "
                             "every program using this install loads it; replaces a packaged artifact of the "
                             "same name (how the shipped artifacts are regenerated)")
    parser.add_argument("--save-dot", action="store_true", help="also write the tree as Graphviz DOT")
    parser.add_argument("--holdout", default="none", choices=HOLDOUTS,
                        help="inputs never trained on: none (default), sha1mod5 (the held-out protocol: bucket 0 of "
                             "sha1(key) %% 5) or sha1mod5:B (bucket B instead, B = 0..4)")
    parser.add_argument("--device-name", action="append", default=[], metavar="NAME",
                        help="make the artifact specific to this device name (repeatable)")
    parser.add_argument("--grid", default="default", choices=sorted(GRIDS),
                        help="grid searched by cross-validation: default (the official datasets) or sparse "
                             "(logs that time each input on its own sample of a wide space: shallower trees and a "
                             "support floor per choice)")
    parser.add_argument("--alignment-features", action="store_true",
                        help="also give the tree each operand's leading-stride residue mod 8 (mat1_align, "
                             "mat2_align), for logs that hold unaligned GEMMs collected unpadded, where "
                             "cuBLAS takes a slow path")
    args = parser.parse_args(argv)
    argv_text = sys.argv[1:] if argv is None else list(argv)
    command = "python -m torchgen_ah.mm.train_decision_mm " + shlex.join(argv_text)
    try:
        out_dir = output_folder(args.out, args.into_package)
        out = run(args.dataset, args.heuristic_name, ranking=args.ranking,
                  data=[tuple(d) for d in args.data], out_dir=out_dir, save_dot=args.save_dot,
                  holdout=args.holdout, device_names=tuple(args.device_name), grid=GRIDS[args.grid],
                  alignment=args.alignment_features, command=command)
    except (OSError, ValueError, KeyError) as exc:
        return command_line.fail("train_decision_mm", exc, 1)
    print(f"wrote {out.artifact_path}" + (f", {out.dot_path}" if out.dot_path else "")
          + f", {out.report_path} in {out.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
