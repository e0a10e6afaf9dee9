"""Ship check for MMRankingH200: re-score a committed H200 evaluation run with it, beside the packaged ranking.

Why: the issue-5 bar (``benchmarks/h200_quality.py``) scores rankers on held-out inputs of our own
collection, which has few small-M (decoding) shapes. The evaluation run (``torchgen_ah.evaluate``:
real-model shapes, each timed on default's choices and on the wider searched space) is a second test
set, scored the way the plugin's USE policy runs. Re-scoring it needs no GPU: the run's logs hold every
timing. An artifact that wins the bar but breaks the evaluation's worst-case bar must not ship.

MMRankingH200 is trained on every input of ``--datasets`` (no hold-out: what would ship), with the flags
of ``h200_quality``, into a temporary folder that the USE policy reads as the user's artifact folder (a
device-specific artifact there wins on an H200). The packaged ranking is ``artifacts/`` as installed.
Both go through ``torchgen_ah.policies.ours_policy`` on one timing table. Inputs of the run whose key is
also an input of the training data are counted, and the figures are repeated without them.

    python benchmarks/h200_eval_rescore.py [--run benchmarks/runs/evaluate_h200] [--datasets datasets/h200]
        [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile

import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import h200_quality as hq  # noqa: E402
from benchmarks._results import publish  # noqa: E402
from torchgen_ah.evaluate import DEFAULT_SHAPES, build_tables, read_shapes  # noqa: E402
from torchgen_ah.mm import train_decision_mm as mm  # noqa: E402
from torchgen_ah.policies import ours_policy, score_policies, summarize  # noqa: E402
from torchgen_ah.train_decision import SPARSE_GRID  # noqa: E402

RUN = os.path.join(ROOT, "benchmarks", "runs", "evaluate_h200")
POLICIES = (("ours_k10", 10, False), ("ours_adaptive", "adaptive", False), ("ours_k1", 1, False),
            ("ours_top1", 1, True))
#: issue 6's "Fast" bar: adaptive k may be at most this much slower than default's pick on any input
WORST_BAR = 1.10
PACKAGED, H200 = "packaged (artifacts/)", f"{hq.H200_NAME} (all H200 data)"


def train_all(data_dir: str, out_dir: str) -> tuple[str, str, set[str]]:
    """MMRankingH200 on every input of `data_dir`: (artifact path, command, the training inputs' keys)."""
    main_path, real_paths = hq.find_files(data_dir)
    argv = [hq.rel(main_path), "--heuristic-name", hq.H200_NAME, "--ranking", str(hq.K), "--save-dot"]
    data = [(hq.extra_name(p), p) for p in real_paths]
    for name, path in data:
        argv += ["--data", name, hq.rel(path)]
    argv += ["--device-name", hq.DEVICE_NAME, "--grid", "sparse", "--out", "OUT_DIR"]
    command = "python -m torchgen_ah.mm.train_decision_mm " + shlex.join(argv)
    out = mm.run(main_path, hq.H200_NAME, ranking=hq.K, data=data, out_dir=out_dir, save_dot=True,
                 device_names=(hq.DEVICE_NAME,), grid=SPARSE_GRID, command=command, log=lambda *a: None)
    keys: set[str] = set()
    for path in [main_path] + real_paths:
        keys |= set(hq.load_file(path, "x", default_only=False).table.keys)
    return out.artifact_path, command, keys


def mm_table(run_dir: str, shapes_path: str):
    """The run's mm timing table, with the run's GPU name (logs do not carry it; device-specific
    artifacts need it). Read-only: nothing is written into the run folder."""
    tables = build_tables(read_shapes(shapes_path), run_dir)
    if "mm" not in tables:
        raise SystemExit(f"h200_eval_rescore: {run_dir}: no mm logs for the shapes of {shapes_path}")
    table = tables["mm"]
    env_path = os.path.join(run_dir, "environment.json")
    try:
        with open(env_path, encoding="utf-8") as fh:
            gpu = json.load(fh).get("gpu")
    except (OSError, ValueError) as exc:
        raise SystemExit(f"h200_eval_rescore: {env_path}: {exc}") from exc
    if gpu:
        table.metadata.setdefault("device_name", gpu)
    return table, gpu


def score(table, artifact_dirs: dict[str, str | None]) -> pd.DataFrame:
    """Per input and policy, for each ranker: ``score_policies``' rows with a ``ranker`` column."""
    frames = []
    for ranker, artifact_dir in artifact_dirs.items():
        policies = [ours_policy(k, table.metadata, artifact_dir=artifact_dir, name=name, alone=alone)
                    for name, k, alone in POLICIES]
        frame = score_policies(table, policies)
        frame["ranker"] = ranker
        frame["artifact"] = frame["policy"].map({p.name: _describe(p.artifact) for p in policies})
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _describe(artifact) -> str:
    """An artifact as the report names it: class, source, file name (no machine-specific path)."""
    if artifact is None:
        return "none fits"
    return f"{artifact.name} ({artifact.source}: {os.path.basename(artifact.path)})"


def summaries(per_input: pd.DataFrame) -> pd.DataFrame:
    """``summarize``'s row per policy, for each ranker (column ``ranker``)."""
    return pd.concat([summarize(group).assign(ranker=ranker)
                      for ranker, group in per_input.groupby("ranker", sort=False)], ignore_index=True)


def summary_lines(summary: pd.DataFrame) -> list[str]:
    head = ["ranker", "policy", "inputs", "gmean vs default's pick", "worst", "worse by > 2%",
            "worse by > 10%", "choices benchmarked (mean)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for _, row in summary.iterrows():
        lines.append(f"| {row['ranker']} | {row['policy']} | {row['inputs']} | {row['gmean_vs_default']:.4f} | "
                     f"{row['max_vs_default']:.3f} | {row['worse_2pct']} | {row['worse_10pct']} | "
                     f"{row['mean_benchmarked']:.1f} |")
    return lines


def verdict(summary: pd.DataFrame) -> tuple[str, bool]:
    """Whether the H200 artifact keeps the evaluation's bars where the packaged ranking keeps them:
    adaptive k's worst input within WORST_BAR, and no worse geomean at k=10 and adaptive k."""
    s = summary.set_index(["ranker", "policy"])
    worst = s.loc[(H200, "ours_adaptive"), "max_vs_default"]
    worse_gmean = [p for p in ("ours_k10", "ours_adaptive")
                   if round(s.loc[(H200, p), "gmean_vs_default"], 4) > round(s.loc[(PACKAGED, p), "gmean_vs_default"], 4)]
    ok = worst <= WORST_BAR and not worse_gmean
    parts = [f"adaptive k's worst input {worst:.3f}x of default's pick (bar <= {WORST_BAR:.2f})"]
    if worse_gmean:
        parts.append("geomean worse than the packaged ranking's at " + ", ".join(worse_gmean))
    head = "keeps" if ok else "does NOT keep"
    return f"**{hq.H200_NAME} {head} the evaluation's bars**: " + "; ".join(parts) + ".", ok


def run(run_dir: str, data_dir: str, shapes_path: str = DEFAULT_SHAPES,
        argv: list[str] | None = None) -> tuple[str, bool, dict]:
    """Everything but writing RESULTS.md: (markdown body, verdict, details for tests)."""
    table, gpu = mm_table(run_dir, shapes_path)
    with tempfile.TemporaryDirectory(prefix="h200_rescore_") as tmp:
        art_dir = os.path.join(tmp, "artifacts")
        path, train_cmd, train_keys = train_all(data_dir, art_dir)
        per_input = score(table, {PACKAGED: None, H200: art_dir})
    seen = per_input["input"].isin(train_keys)
    unseen = per_input[~seen]
    summary = summaries(per_input)
    text, ok = verdict(summary)
    n_inputs = per_input["input"].nunique()
    n_seen = per_input.loc[seen, "input"].nunique()
    artifacts = per_input.groupby("ranker")["artifact"].first().to_dict()
    command = "python benchmarks/h200_eval_rescore.py" + (" " + shlex.join(argv) if argv else "")
    body = "\n".join([
        "## MMRankingH200 on the H200 evaluation run (ship check, issue 5)", "",
        f"Command: `{command}`. Run: `{hq.rel(run_dir)}` (GPU {gpu}; mm timing table of "
        f"`{hq.rel(shapes_path)}`, {n_inputs} inputs), re-scored on the CPU. {hq.H200_NAME} trained on every "
        f"input of `{hq.rel(data_dir)}` with `{train_cmd}`; it is read as the user's artifact folder, so it "
        "is chosen on this device the way the plugin would choose it. Policies as `torchgen_ah.evaluate` "
        "runs them (USE policy: top k, or adaptive k, plus aten; `ours_top1`: one choice, nothing "
        "benchmarked). Regret = time of the kernel the policy ends with / time of default max-autotune's "
        "pick.", "",
        *[f"- {r}: {a}" for r, a in artifacts.items()], "",
        "All inputs:", "",
        *summary_lines(summary), "",
        f"{n_seen} of the {n_inputs} inputs are also inputs of the training data (same key), so the table "
        "above is not a clean hold-out. Without them:", "",
        *(summary_lines(summaries(unseen)) if len(unseen) else ["(none left)"]), "",
        text,
    ])
    return body, ok, {"per_input": per_input, "train_keys": train_keys, "table": table, "artifact": path}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=RUN, help="a finished torchgen_ah.evaluate run (default: the committed one)")
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="the run's shapes file")
    parser.add_argument("--datasets", default=os.path.join(ROOT, "datasets", "h200"),
                        help="folder of the H200 logs to train on (default datasets/h200)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    body, _, _ = run(args.run, args.datasets, args.shapes, argv)
    return publish("h200_eval_rescore", body, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
