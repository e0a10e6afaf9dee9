"""Timing methods against the replay-fastest candidate: how often each method's pick differs, and what it costs.

Why: a compiled model runs its GEMMs under CUDA graphs, so the kernel to pick is the one fastest under
CUDA-graph replay. Inductor's own per-call event timing (default max-autotune) counts launch latency and a
cold cache, and may pick another kernel; this report says how often, and how much slower its pick runs
under replay. Replay timing's own pick is graded the same way, so the per-call figures can be read against
replay's run-to-run noise.

    python -m torchgen_ah.evaluation.studies.method_agreement --replay LOG --per-call LOG \\
        [--results benchmarks/RESULTS.md] [--json OUT.json]

Both logs time the same inputs and candidates. Per input in both (only choices timed in both logs and in
both replay repetitions):

* reference: the fastest choice in the replay log's repetition 2 (a measurement neither pick was made on);
* replay pick: the fastest in the replay log's repetition 1;
* per-call pick: the fastest by the per-call log's median over its repetitions (Inductor's pick);
* a pick's regret: its repetition-2 replay time / the reference's (1.0: as fast as the reference).

The k-th row of an (input, choice) in file order is its repetition k (``repetitions``). Inputs with fewer
than two replay repetitions are left out and counted.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd

from ah_plugin.report import command_line
from ah_plugin.use.choice_ids import base_id
from ah_plugin.collect.log_format import CHOICE_COLUMN, FEEDBACK_COLUMN
from ah_plugin.replay_timing import METHOD_REPLAY
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log
from torchgen_ah.data.merge import metadata_differences
from torchgen_ah.evaluation import markdown_tables as md
from torchgen_ah.evaluation.studies.gemm_families import dtype_label, layout
from torchgen_ah.evaluation.results_section import publish_report
from torchgen_ah.mm.train_decision_mm import require_mm_features
from torchgen_ah.training.train_decision import MedianTimeMatrix, median_time_matrix

PROG = "python -m torchgen_ah.evaluation.studies.method_agreement"
SECTION = "method_agreement"
TITLE = "## Timing methods: picks against the replay-fastest candidate"

PER_CALL, REPLAY = "per_call", "replay"
METHODS = (PER_CALL, REPLAY)
METHOD_LABELS = {PER_CALL: "per-call", REPLAY: "replay"}
ATEN, TEMPLATE = "aten", "template"
#: metadata keys that must agree for two logs to describe the same inputs on the same device
SAME_KEYS = ("name", "device_capa", "shared_memory", "numerical_features", "categorical_features")


def repetitions(keys, choices) -> np.ndarray:
    """Repetition number (1-based) of every row: the k-th row of an (input key, choice) in row order is k."""
    pairs = pd.DataFrame({"key": np.asarray(keys, dtype=object), "choice": np.asarray(choices, dtype=object)})
    return pairs.groupby(["key", "choice"], sort=False).cumcount().to_numpy() + 1


def load(path: str, replay: bool) -> tuple[pd.DataFrame, dict]:
    """One log's rows (features in metadata order, choice, feedback) with their input key; ValueError naming
    the file when its timing method is not the one asked for."""
    log = read_log(path)
    require_mm_features(log.metadata, path)
    timing = log.metadata.get("timing")
    if replay and timing != METHOD_REPLAY:
        raise ValueError(f"{path}:1: --replay log is not timed by CUDA-graph replay (metadata timing is "
                         f"{timing or 'absent'!r}, not {METHOD_REPLAY!r})")
    if not replay and timing == METHOD_REPLAY:
        raise ValueError(f"{path}:1: --per-call log is timed by CUDA-graph replay (metadata timing is "
                         f"{METHOD_REPLAY!r}); give the log of Inductor's own per-call timing")
    # one column order for both logs, so the same input gets the same key in each
    frame = log.frame[feature_columns(log.metadata) + [CHOICE_COLUMN, FEEDBACK_COLUMN]]
    return frame.assign(key=input_keys(frame, log.metadata)), log.metadata


def matrix(frame: pd.DataFrame, metadata: dict, name: str) -> MedianTimeMatrix:
    """Median time per (input, choice) of these rows (inf: failed; nan: not run)."""
    return median_time_matrix(frame, feature_columns(metadata), name, keys=frame["key"])


def aligned(table: MedianTimeMatrix, keys: list[str], choices: list[str]) -> np.ndarray:
    """``table``'s times re-indexed to ``keys`` x ``choices`` (nan where it has no time)."""
    times = table.aligned_times(choices)
    row = {k: i for i, k in enumerate(table.keys)}
    return times[[row[k] for k in keys]]


def short_choice(choice: str) -> str:
    """A choice id as a table cell: ``aten``, ``triton 64x32x128 s3 w4`` (BLOCK M x K x N, stages, warps),
    ``tma ...`` for the persistent TMA template, ``decompose-K split=32``; other ids as they are."""
    cid = base_id(choice)
    if cid.startswith("extern_"):
        return "aten" if cid == "extern_mm" else f"aten ({cid.removeprefix('extern_')})"
    if split := re.search(r"decompose_k_k_split=(\d+)", cid):
        return f"decompose-K split={split.group(1)}"
    found = re.match(r"type=triton(?:-(\w+?))?_BLOCK-M=(\d+)_BLOCK-K=(\d+)_BLOCK-N=(\d+)_numstages=(\d+)"
                     r"_numwarps=(\d+)(.*)$", cid)
    if not found:
        return cid
    template, bm, bk, bn, stages, warps, rest = found.groups()
    name = {None: "triton", "mm_persistent_tma": "tma"}.get(template, template)
    extras = [e.replace("-", "_") for e in rest.split("_") if e and not e.startswith("TMA-SIZE=")]
    return " ".join([name, f"{bm}x{bk}x{bn}", f"s{stages}", f"w{warps}", *extras])


def pick_row(times: np.ndarray, reference_times: np.ndarray, reference: int, choices: list[str]) -> dict:
    """One method's pick (argmin of ``times``) graded on the reference run."""
    pick = int(np.argmin(times))
    return {"pick": choices[pick], "differs": pick != reference,
            "regret": float(reference_times[pick] / reference_times[reference])}


def input_row(key: str, feat: pd.Series, r1: np.ndarray, r2: np.ndarray, pc: np.ndarray, choices: list[str],
              replay_reps: int) -> dict | None:
    """The picks for one input, over the choices with a time in all three; None when there is none."""
    usable = np.isfinite(r1) & np.isfinite(r2) & np.isfinite(pc)
    if not usable.any():
        return None
    names = [c for c, ok in zip(choices, usable) if ok]
    r1, r2, pc = r1[usable], r2[usable], pc[usable]
    reference = int(np.argmin(r2))
    m, k, n = (int(feat[c]) for c in ("m", "k", "n"))
    return {"key": key, "m": m, "k": k, "n": n, "dtype": dtype_label(feat), "layout": layout(feat),
            "choices": len(names), "replay_repetitions": replay_reps, "reference": names[reference],
            "reference_kind": ATEN if base_id(names[reference]).startswith("extern_") else TEMPLATE,
            "reference_us": float(r2[reference] * 1000.0),
            PER_CALL: pick_row(pc, r2, reference, names), REPLAY: pick_row(r1, r2, reference, names)}


def method_summary(rows: list[dict], method: str) -> dict:
    regrets = [r[method]["regret"] for r in rows]
    differs = sum(r[method]["differs"] for r in rows)
    return {"differs": differs, "differs_pct": 100.0 * differs / len(rows) if rows else None,
            "geomean_regret": md.finite(geomean(regrets)), "worst_regret": max(regrets) if regrets else None}


def group_summary(name: str, rows: list[dict]) -> dict:
    return {"group": name, "inputs": len(rows), **{m: method_summary(rows, m) for m in METHODS}}


def report(replay_path: str, per_call_path: str) -> dict:
    """Every figure of the report (see the module docstring) as plain data."""
    replay, meta = load(replay_path, replay=True)
    per_call, per_call_meta = load(per_call_path, replay=False)
    if diff := metadata_differences(meta, per_call_meta, SAME_KEYS):
        raise ValueError(f"{per_call_path}:1: metadata differs from {replay_path}:1 in {', '.join(diff)}")
    replay = replay.assign(rep=repetitions(replay["key"], replay[CHOICE_COLUMN]))
    reps = replay.groupby("key")["rep"].max()
    per_call_keys = set(per_call["key"])
    both = sorted(set(reps.index) & per_call_keys)
    two_reps = [k for k in both if reps[k] >= 2]
    r1 = matrix(replay[replay["rep"] == 1], meta, "replay repetition 1")
    r2 = matrix(replay[replay["rep"] == 2], meta, "replay repetition 2")
    pc = matrix(per_call, meta, "per-call")
    choices = sorted(set(r1.choices) | set(pc.choices))
    times = [aligned(t, two_reps, choices) for t in (r1, r2, pc)]
    features = r2.features.set_index(pd.Index(r2.keys))
    rows = [input_row(k, features.loc[k], times[0][i], times[1][i], times[2][i], choices, int(reps[k]))
            for i, k in enumerate(two_reps)]
    compared = [r for r in rows if r is not None]
    groups = [group_summary(kind, [r for r in compared if r["reference_kind"] == kind])
              for kind in (ATEN, TEMPLATE)]
    return {"replay_log": replay_path, "per_call_log": per_call_path,
            "left_out": {"replay_only": len(set(reps.index) - per_call_keys),
                         "per_call_only": len(per_call_keys - set(reps.index)),
                         "one_replay_repetition": len(both) - len(two_reps),
                         "no_choice_in_both": len(rows) - len(compared)},
            "more_replay_repetitions": sum(r["replay_repetitions"] > 2 for r in compared),
            "summary": group_summary("any", compared), "groups": groups, "inputs": compared}


def summary_table(groups: list[dict]) -> list[str]:
    header = ["inputs", "reference kind", "per-call pick differs", "replay pick differs",
              *[f"{METHOD_LABELS[m]} {what}" for m in METHODS for what in ("geomean regret", "worst regret")]]
    body = []
    for g in groups:
        differs = [f"{g[m]['differs']} ({md.cell(g[m]['differs_pct'], '.1f')}%)" for m in METHODS]
        regrets = [md.cell(g[m][what], ".3f") for m in METHODS for what in ("geomean_regret", "worst_regret")]
        body.append([str(g["inputs"]), g["group"], *differs, *regrets])
    return md.table(header, body, text_columns=(1,))


def _pick_cell(row: dict, method: str) -> str:
    return "(reference)" if not row[method]["differs"] else short_choice(row[method]["pick"])


def input_table(rows: list[dict]) -> list[str]:
    shown = sorted((r for r in rows if r[PER_CALL]["differs"] or r[REPLAY]["differs"]),
                   key=lambda r: -max(r[PER_CALL]["regret"], r[REPLAY]["regret"]))
    if not shown:
        return ["Both picks are the reference on every input."]
    header = ["m x k x n", "dtype", "layout", "reference", "reference us", "per-call pick", "per-call regret",
              "replay pick", "replay regret"]
    body = [[f"{r['m']}x{r['k']}x{r['n']}", r["dtype"], r["layout"], short_choice(r["reference"]),
             f"{r['reference_us']:.1f}", _pick_cell(r, PER_CALL), f"{r[PER_CALL]['regret']:.3f}",
             _pick_cell(r, REPLAY), f"{r[REPLAY]['regret']:.3f}"] for r in shown]
    return [f"Inputs where either pick differs ({len(shown)} of {len(rows)}, highest regret first; layout N/T per "
            "operand: row-/column-major; configs BLOCK M x K x N, stages, warps):", "",
            *md.table(header, body, text_columns=(0, 1, 2, 3, 5, 7))]


def markdown(result: dict, command: str) -> str:
    summary, left = result["summary"], result["left_out"]
    lines = [TITLE, "", f"Command: `{command}`", "",
             f"{summary['inputs']} inputs timed in both {result['replay_log']} (CUDA-graph replay) and "
             f"{result['per_call_log']} (Inductor's per-call timing). Reference: the fastest candidate in the "
             "replay log's repetition 2. Replay pick: the fastest in its repetition 1. Per-call pick: the fastest "
             "by the per-call log's median (default max-autotune's pick). Regret: the pick's repetition-2 replay "
             "time / the reference's, what the pick costs under CUDA graphs."]
    dropped = {"replay_only": "only in the replay log", "per_call_only": "only in the per-call log",
               "one_replay_repetition": "with one replay repetition",
               "no_choice_in_both": "without a choice timed in both"}
    left_text = [f"{left[k]} {text}" for k, text in dropped.items() if left[k]]
    if left_text:
        lines.append("Inputs left out: " + ", ".join(left_text) + ".")
    if result["more_replay_repetitions"]:
        lines.append(f"{result['more_replay_repetitions']} input(s) have more than two replay repetitions "
                     "(listed more than once per collection pass); their repetitions 1 and 2 are used.")
    lines += ["", *summary_table([summary]), "", "By the kind of the reference:", "",
              *summary_table(result["groups"]), "", *input_table(result["inputs"])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = command_line.parser(PROG, __doc__.split("\n")[0])
    parser.add_argument("--replay", required=True, metavar="LOG",
                        help='mm log timed by CUDA-graph replay ("timing": "cudagraph_replay"), two repetitions')
    parser.add_argument("--per-call", required=True, metavar="LOG",
                        help="mm log of the same inputs timed by Inductor's own per-call timing")
    parser.add_argument("--results", default=None, help="also write the report as a section of this markdown file")
    parser.add_argument("--json", default=None, metavar="OUT.json", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    try:
        result = report(args.replay, args.per_call)
    except (OSError, ValueError) as exc:  # AHLogError is a ValueError naming the file and line
        return command_line.fail(PROG, exc)
    argv_text = " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result, f"{PROG} {argv_text}".strip())
    return publish_report(text, result, SECTION, args.json, args.results)


if __name__ == "__main__":
    sys.exit(main())
