"""Ship check for MMRankingH200: re-score a committed H200 evaluation run with it, beside the packaged ranking.

Why: the held-out bar (``benchmarks/h200_quality.py``) scores rankers on held-out inputs of our own
collection, which has few small-M (decoding) shapes. The evaluation run (``torchgen_ah.evaluate``:
real-model shapes, each timed on default's choices and on the wider searched space) is a second test
set, scored the way the plugin's USE policy runs. Re-scoring it needs no GPU: the run's logs hold every
timing. An artifact that wins the bar but breaks the evaluation's worst-case bar must not ship.

MMRankingH200 is trained on every input of ``--datasets`` (no hold-out: what ships), with the flags
of ``h200_quality``. Two artifact folders are scored, each alone (package off): the baseline holds the
packaged artifacts except MMRankingH200 (on an H200 that is MMRankingH100, what ran before
MMRankingH200 shipped), the other the same plus the freshly trained MMRankingH200 (a device-specific
artifact wins on an H200). Both go through ``torchgen_ah.evaluation.policies.ours_policy`` on one timing table.
Inputs of the run whose key is also an input of the training data are counted, and the figures are
repeated without them. The report also says whether the shipped ``artifacts/_MMRankingH200.py`` is
the one this data trains (regenerate it when the data grows).

``benchmarks/h200_eval_rescore.py`` is the command line.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile

import numpy as np
import pandas as pd

from ah_plugin.use import artifact_loader
from ah_plugin.replay_timing import METHOD_REPLAY
from torchgen_ah.evaluation.studies import h200_quality as hq
from torchgen_ah.evaluation.evaluate import DEFAULT_SHAPES, build_tables, read_shapes
from torchgen_ah.evaluation.policies import ours_policy, score_policies, summarize
from torchgen_ah.mm import train_decision_mm as mm
from torchgen_ah.training.ranker_scoring import paired_ratio_interval
from torchgen_ah.training.train_decision import SPARSE_GRID

POLICIES = (("plugin_k10", 10, False), ("plugin_adaptive", "adaptive", False), ("plugin_k1", 1, False),
            ("plugin_top1", 1, True))
#: the evaluation's "Fast" bar (docs/evaluate.md): adaptive k may be at most this much slower than default's
#: pick on any input
WORST_BAR = 1.10
PACKAGED, H200 = f"packaged without {hq.H200_NAME}", f"{hq.H200_NAME} (all H200 data)"
#: the policies whose geomean must not get worse (resolved, by the paired interval) for MMRankingH200 to ship
GUARDED = ("plugin_k10", "plugin_adaptive")


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


def artifact_sets(package_dir: str, trained: str, out_dir: str) -> dict[str, str]:
    """The two folders the rankers read, each alone: the packaged artifacts without MMRankingH200
    (PACKAGED), and the same plus the freshly trained one at `trained` (H200)."""
    shipped = f"_{hq.H200_NAME}.py"
    dirs = {PACKAGED: os.path.join(out_dir, "packaged"), H200: os.path.join(out_dir, "with_h200")}
    for folder in dirs.values():
        os.makedirs(folder)
    for path in artifact_loader.artifact_files(package_dir):
        if os.path.basename(path) != shipped:
            for folder in dirs.values():
                shutil.copy(path, folder)
    shutil.copy(trained, os.path.join(dirs[H200], shipped))
    return dirs


def shipped_status(package_dir: str, trained: str) -> tuple[str, bool]:
    """Whether the shipped artifact is the one this data trains: same code, ignoring the header comments
    (they hold the training command, whose output folder differs)."""
    shipped = os.path.join(package_dir, f"_{hq.H200_NAME}.py")
    if not os.path.exists(shipped):
        return f"`artifacts/_{hq.H200_NAME}.py` is not shipped.", False

    def body(path: str) -> list[str]:
        with open(path, encoding="utf-8") as fh:
            return [line for line in fh if not line.startswith("#")]

    if any(line.strip() == f"timing = '{METHOD_REPLAY}'" for line in body(shipped)):
        # trained on replay-timed data (datasets/h200_replay): this per-call artifact is scored, not shipped
        return (f"The shipped `artifacts/_{hq.H200_NAME}.py` is trained on CUDA-graph replay timings "
                "(datasets/h200_replay; its header has the command); the per-call artifact scored here is "
                "not shipped.", True)
    if body(shipped) == body(trained):
        return f"The shipped `artifacts/_{hq.H200_NAME}.py` is this artifact (same code).", True
    return (f"The shipped `artifacts/_{hq.H200_NAME}.py` is NOT this artifact: regenerate it with the "
            "training command above, `--into-package` in place of `--out OUT_DIR`.", False)


def score(table, artifact_dirs: dict[str, str]) -> pd.DataFrame:
    """Per input and policy, for each ranker (its artifact folder alone): ``score_policies``' rows with a
    ``ranker`` column."""
    frames = []
    for ranker, artifact_dir in artifact_dirs.items():
        policies = [ours_policy(k, table.metadata, artifact_dir=artifact_dir, name=name, alone=alone,
                                package=False)
                    for name, k, alone in POLICIES]
        frame = score_policies(table, policies)
        frame["ranker"] = ranker
        frame["artifact"] = frame["policy"].map({p.name: _describe(p.artifact) for p in policies})
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _describe(artifact) -> str:
    """An artifact as the report names it: class and file name (no machine-specific path)."""
    if artifact is None:
        return "none fits"
    return f"{artifact.name} ({os.path.basename(artifact.path)})"


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


def verdict(per_input: pd.DataFrame) -> tuple[str, bool]:
    """Whether the H200 artifact keeps the evaluation's bars, at k=10 and adaptive k (GUARDED): every
    regret finite, no input over WORST_BAR (the Fast bar's worst case, held at k=10 too so that one large
    loss cannot hide in a geomean), and a geomean not resolved worse than the packaged ranking's
    (per-input ratio of the regrets vs default's pick, 95% paired bootstrap interval above 1). Why an
    interval: on a few dozen inputs, two inputs trading places move the geomean in the fourth decimal."""
    ratios, failures = [], []
    for policy in GUARDED:
        rows = {r: per_input[(per_input["ranker"] == r) & (per_input["policy"] == policy)].set_index("input")
                ["regret_vs_default"] for r in (H200, PACKAGED)}
        mine = rows[H200]
        base = rows[PACKAGED].reindex(mine.index)  # the same inputs, in the same order
        if not (np.isfinite(mine).all() and np.isfinite(base).all()):
            failures.append(f"{policy}: regrets not all finite")
            continue
        worst = float(mine.max())
        ratio, lo, hi = paired_ratio_interval(mine.to_numpy(), base.to_numpy())
        tag = "worse, resolved" if lo > 1.0 else "better, resolved" if hi < 1.0 else "not resolved"
        ratios.append(f"{policy} worst {worst:.3f}x, {ratio:.4f} ({lo:.4f}-{hi:.4f}; {tag})")
        if worst > WORST_BAR:
            failures.append(f"{policy}: an input at {worst:.3f}x of default's pick (bar <= {WORST_BAR:.2f})")
        if lo > 1.0:
            failures.append(f"{policy}: resolved worse than the packaged ranking")
    ok = not failures
    parts = [f"worst input of default's pick (bar <= {WORST_BAR:.2f}) and geomean / the packaged ranking's, "
             f"per-input ratio (95% paired interval): {'; '.join(ratios)}"]
    if failures:
        parts.append("fails: " + "; ".join(failures))
    head = "keeps" if ok else "does NOT keep"
    return f"**{hq.H200_NAME} {head} the evaluation's bars**: " + "; ".join(parts) + ".", ok


def run(run_dir: str, data_dir: str, shapes_path: str = DEFAULT_SHAPES,
        argv: list[str] | None = None, package_dir: str | None = None) -> tuple[str, bool, dict]:
    """Everything but writing RESULTS.md: (markdown body, verdict, details for tests)."""
    table, gpu = mm_table(run_dir, shapes_path)
    package_dir = package_dir or artifact_loader.package_artifact_dir()
    if not package_dir:
        raise SystemExit("h200_eval_rescore: no packaged artifacts folder (is ah-plugin installed?)")
    with tempfile.TemporaryDirectory(prefix="h200_rescore_") as tmp:
        path, train_cmd, train_keys = train_all(data_dir, os.path.join(tmp, "trained"))
        shipped_text, shipped_ok = shipped_status(package_dir, path)
        per_input = score(table, artifact_sets(package_dir, path, tmp))
    artifacts = per_input.groupby("ranker")["artifact"].first().to_dict()
    if artifacts[PACKAGED].startswith(hq.H200_NAME + " ") or not artifacts[H200].startswith(hq.H200_NAME + " "):
        raise SystemExit(f"h200_eval_rescore: the rankers are {artifacts}: the baseline must be the package "
                         f"without {hq.H200_NAME}, the other {hq.H200_NAME} (is another artifact defining it?)")
    seen = per_input["input"].isin(train_keys)
    unseen = per_input[~seen]
    summary = summaries(per_input)
    text, ok = verdict(per_input)
    n_inputs = per_input["input"].nunique()
    n_seen = per_input.loc[seen, "input"].nunique()
    command = "python benchmarks/h200_eval_rescore.py" + (" " + shlex.join(argv) if argv else "")
    body = "\n".join([
        "## MMRankingH200 on the H200 evaluation run (ship check, issue 5)", "",
        f"Command: `{command}`. Run: `{hq.rel(run_dir)}` (GPU {gpu}; mm timing table of "
        f"`{hq.rel(shapes_path)}`, {n_inputs} inputs), re-scored on the CPU. {hq.H200_NAME} trained on every "
        f"input of `{hq.rel(data_dir)}` with `{train_cmd}`. Two artifact folders, each read alone by the "
        f"plugin's artifact chooser for this device: the packaged artifacts without {hq.H200_NAME} (on an "
        f"H200, what ran before it shipped), and the same plus this {hq.H200_NAME}. Policies as `torchgen_ah.evaluate` "
        "runs them (USE policy: top k, or adaptive k, plus aten; `plugin_top1`: one choice, nothing "
        "benchmarked). Regret = time of the kernel the policy ends with / time of default max-autotune's "
        "pick.", "",
        *[f"- {r}: {a}" for r, a in artifacts.items()], "",
        "All inputs:", "",
        *summary_lines(summary), "",
        f"{n_seen} of the {n_inputs} inputs are also inputs of the training data (same key), so the table "
        "above is not a clean hold-out. Without them:", "",
        *(summary_lines(summaries(unseen)) if len(unseen) else ["(none left)"]), "",
        text, "", shipped_text,
    ])
    return body, ok, {"per_input": per_input, "train_keys": train_keys, "table": table, "shipped": shipped_ok}

