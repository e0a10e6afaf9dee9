"""One timing table per evaluation: the median time of every (input, choice) of the searched space.

Every policy (default max-autotune, the built-in AutoHeuristic, our heuristic at each k, the results
cache) is scored on this one table, so no policy is flattered or punished by process-to-process noise
(the same kernel's time differs by up to 1.5x between processes).

The table is built from AutoHeuristic logs written by the plugin's collector while one process per
input autotuned that input several times:

- "searched" logs: the autotunings over the whole searched space (repetitions), the source of the times;
- "default" logs (optional): autotunings over default max-autotune's own space; the choices they list
  for an input are default's choice set for that input, and the winner of their first autotuning is what
  a results cache recorded from one ordinary run. Their times join the medians too (same process).

Without default logs every searched choice counts as default's (the searched space *is* default's).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log
from torchgen_ah.data.merge import metadata_differences

TABLE_FILE = "timing_table.csv"
INPUTS_FILE = "timing_inputs.json"
TABLE_COLUMNS = ["input", "choice", "time_ms", "reps", "failed", "spread", "in_default"]


@dataclass
class EvaluationTimingTable:
    """Median times per (input, choice) of one evaluation run, plus what each input needs for scoring.

    Why not the trainer's ``MedianTimeMatrix``: a policy is replayed on each input's own candidates in the
    order the log lists them (the built-in AutoHeuristic maps an id to the last choice registered under
    it, so order changes its answer), against default max-autotune's set and first pick for that input;
    the table is saved with the run and re-scored from it (``--from-run``).

    frame: one row per (input, choice): ``time_ms`` (median of the finite timings, ``inf`` when every
        run failed), ``reps`` (finite timings), ``failed`` (inf timings), ``spread`` (max/min of the
        finite timings), ``in_default`` (the choice is in default max-autotune's set for that input).
    features: input key -> the log's feature values of that input (what a heuristic ranks on).
    metadata: the log metadata (device capability, shared memory, feature names).
    first_pick: input key -> winner of the first default-space autotuning (what a cache would hold).
    left_out: input keys logged only by the searched-space runs while default-space logs were given: no
        default set to score them against (e.g. Inductor's pad_mm padded the shape in those runs only).
    """

    frame: pd.DataFrame
    features: dict[str, dict]
    metadata: dict
    first_pick: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # input key -> readable name (shape row)
    left_out: list[str] = field(default_factory=list)

    def inputs(self) -> list[str]:
        """Input keys in first-seen order."""
        return list(dict.fromkeys(self.frame["input"].tolist()))

    def times(self, key: str) -> dict[str, float]:
        """choice -> median ms for one input (failed choices are ``inf``)."""
        rows = self.frame[self.frame["input"] == key]
        return dict(zip(rows["choice"].tolist(), rows["time_ms"].astype(float).tolist()))

    def candidates(self, key: str) -> list[str]:
        """Every choice of the searched space seen for this input, in log order."""
        return self.frame.loc[self.frame["input"] == key, "choice"].tolist()

    def default_set(self, key: str) -> list[str]:
        rows = self.frame[(self.frame["input"] == key) & self.frame["in_default"]]
        return rows["choice"].tolist()

    def label(self, key: str) -> str:
        return self.labels.get(key, key)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, directory) -> tuple[str, str]:
        """Write ``timing_table.csv`` (long format, readable) and ``timing_inputs.json``."""
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        table_path = os.path.join(directory, TABLE_FILE)
        self.frame[TABLE_COLUMNS].to_csv(table_path, index=False)
        inputs_path = os.path.join(directory, INPUTS_FILE)
        meta = dict(self.metadata)
        if isinstance(meta.get("device_capa"), tuple):
            meta["device_capa"] = list(meta["device_capa"])
        with open(inputs_path, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "metadata": meta,
                    "features": self.features,
                    "first_pick": self.first_pick,
                    "labels": self.labels,
                    "left_out": self.left_out,
                },
                f,
                indent=1,
                default=str,
            )
        return table_path, inputs_path

    @classmethod
    def load(cls, directory) -> "EvaluationTimingTable":
        directory = os.fspath(directory)
        frame = pd.read_csv(os.path.join(directory, TABLE_FILE), dtype={"input": str, "choice": str})
        frame["in_default"] = frame["in_default"].astype(bool)
        with open(os.path.join(directory, INPUTS_FILE), encoding="utf-8") as f:
            extra = json.load(f)
        metadata = extra["metadata"]
        if metadata.get("device_capa") is not None:
            metadata["device_capa"] = tuple(metadata["device_capa"])
        return cls(frame, extra["features"], metadata, extra.get("first_pick", {}), extra.get("labels", {}),
                   extra.get("left_out", []))


def _feature_value(value):
    """Plain Python value of a frame cell (numpy ints become int)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _read_rows(paths) -> tuple[pd.DataFrame, dict]:
    """All rows of ``paths`` (same metadata required), with an ``input`` key column and file order."""
    frames, metadata, first_path = [], None, None
    for path in paths:
        log = read_log(path)
        if metadata is None:
            metadata, first_path = log.metadata, path
        elif metadata_differences(metadata, log.metadata, ("name", "numerical_features", "categorical_features")):
            raise ValueError(
                f"{path}:1: log metadata differs from {first_path} "
                "(one timing table needs one operation and one feature set)"
            )
        frame = log.frame.copy()
        frame["input"] = input_keys(frame, log.metadata).to_numpy()
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["input", "choice", "feedback"]), {}
    return pd.concat(frames, ignore_index=True), metadata


def _first_autotuning_pick(rows: pd.DataFrame) -> dict[str, str]:
    """Per input, the winner of its first autotuning in the log: the fastest choice among the rows
    before any choice repeats (each autotuning writes every choice once)."""
    picks = {}
    for key, group in rows.groupby("input", sort=False):
        seen, first = set(), []
        for choice, feedback in zip(group["choice"], group["feedback"]):
            if choice in seen:
                break
            seen.add(choice)
            first.append((float(feedback), choice))
        finite = [(t, c) for t, c in first if math.isfinite(t)]
        if finite:
            picks[key] = min(finite)[1]
    return picks


def build_timing_table(searched_logs, default_logs=(), labels=None) -> EvaluationTimingTable:
    """Median per (input, choice) over every row of ``searched_logs`` and ``default_logs``.

    ``default_logs`` define default's set per input (see module docstring); without them every searched
    choice is default's. With them, inputs they never logged are left out (``left_out``): a shape the
    searched runs logged under another key (pad_mm padding it there) has no default pick to compare with.
    ``labels`` maps input keys to readable names.
    """
    searched_logs, default_logs = list(searched_logs), list(default_logs)
    rows, metadata = _read_rows(searched_logs + default_logs)
    if rows.empty:
        raise ValueError(
            "no timings in the logs: " + ", ".join(map(str, searched_logs + default_logs))
        )
    default_rows, _ = _read_rows(default_logs) if default_logs else (rows.iloc[:0], metadata)
    default_sets = default_rows.groupby("input", sort=False)["choice"].agg(lambda s: set(s)).to_dict()
    left_out = []
    if default_logs:
        left_out = [key for key in dict.fromkeys(rows["input"]) if key not in default_sets]
        rows = rows[rows["input"].isin(default_sets.keys())]

    feedback = rows["feedback"].astype(float)
    rows = rows.assign(finite=np.isfinite(feedback), ms=feedback.where(np.isfinite(feedback)))
    grouped = rows.groupby(["input", "choice"], sort=False)
    table = grouped.agg(
        time_ms=("ms", "median"),
        reps=("finite", "sum"),
        lo=("ms", "min"),
        hi=("ms", "max"),
        n=("finite", "size"),
    ).reset_index()
    table["failed"] = (table["n"] - table["reps"]).astype(int)
    table["reps"] = table["reps"].astype(int)
    table["time_ms"] = table["time_ms"].fillna(math.inf)
    table["spread"] = (table["hi"] / table["lo"]).fillna(math.inf)
    table["in_default"] = [
        (choice in default_sets[key]) if key in default_sets else True
        for key, choice in zip(table["input"], table["choice"])
    ]

    names = feature_columns(metadata)
    first_rows = rows.drop_duplicates("input")
    features = {
        key: {name: _feature_value(row[name]) for name in names}
        for key, (_, row) in zip(first_rows["input"], first_rows.iterrows())
    }
    first_pick = _first_autotuning_pick(default_rows if default_logs else rows)
    return EvaluationTimingTable(
        frame=table[TABLE_COLUMNS].reset_index(drop=True),
        features=features,
        metadata=metadata,
        first_pick=first_pick,
        labels=dict(labels or {}),
        left_out=left_out,
    )


def table_from_records(records, default_sets=None, metadata=None, features=None) -> EvaluationTimingTable:
    """A table from plain (input, choice, time_ms) triples: for tests and hand-made examples.

    ``default_sets`` maps input -> the choices in default's set (all choices when absent).
    """
    frame = pd.DataFrame(records, columns=["input", "choice", "time_ms"])
    frame["time_ms"] = frame["time_ms"].astype(float)
    frame["reps"] = np.isfinite(frame["time_ms"]).astype(int)
    frame["failed"] = 1 - frame["reps"]
    frame["spread"] = 1.0
    default_sets = default_sets or {}
    frame["in_default"] = [
        (c in default_sets[k]) if k in default_sets else True
        for k, c in zip(frame["input"], frame["choice"])
    ]
    keys = list(dict.fromkeys(frame["input"]))
    return EvaluationTimingTable(
        frame=frame[TABLE_COLUMNS],
        features=features or {k: {} for k in keys},
        metadata=metadata or {"name": "mm", "numerical_features": [], "categorical_features": []},
    )
