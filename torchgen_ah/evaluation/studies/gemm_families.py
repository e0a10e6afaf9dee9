"""GEMM families against cuBLAS, from a replay-timed collection log.

Why: whether a template family (the classic Triton mm template, Inductor's persistent TMA template,
decompose-K) is worth offering beside aten (cuBLAS) can only be read from times that rank kernels the way
a compiled model runs them. Inductor's per-call timing counts launch latency and a cold cache, which
mis-ranks small GEMMs, so this report reads logs timed by CUDA-graph replay (``"timing":
"cudagraph_replay"`` in the metadata) and refuses others unless given ``--allow-per-call``.

    python -m torchgen_ah.evaluation.studies.gemm_families LOG [LOG ...] [--margin 0.02] [--rows 40] \\
        [--results benchmarks/RESULTS.md] [--json OUT.json] [--allow-per-call]

An input is one set of feature values (m, k, n, strides, dtypes, ...); a choice's time is the median of its
finite repetitions. Per input: aten's time, each family's best, the fastest family, and best template / aten
(< 1: a template beats cuBLAS). Per family: the inputs that offered it, those where it beats aten by more
than ``--margin``, the median and best family-best / aten, and the **oracle ceiling**: the geometric mean
over all inputs of min(aten, family best) / aten, what a perfect pick between aten and that family reaches
(1.0: nothing to gain). The ceiling is split by dtype and by size class of m*k*n (multiply-adds): small
< 2**30 (about 2 GFLOP, a few us on an H100/H200: launch- and latency-bound), large >= 2**36 (about 137
GFLOP, over 100 us: compute-bound), medium in between.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ah_plugin.report import command_line
from ah_plugin.use.choice_ids import base_id
from ah_plugin.replay_timing import METHOD_REPLAY
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log
from torchgen_ah.data.merge import metadata_differences
from torchgen_ah.evaluation import markdown_tables as md
from torchgen_ah.evaluation.results_section import publish_report
from torchgen_ah.mm.train_decision_mm import require_mm_features
from torchgen_ah.training.train_decision import median_time_matrix, require_usable

PROG = "python -m torchgen_ah.evaluation.studies.gemm_families"
SECTION = "gemm_families"
TITLE = "## GEMM families against cuBLAS (replay-timed collection)"

ATEN, TRITON, TMA, DECOMPOSE_K = "aten", "classic Triton", "persistent TMA", "decompose-K"
OTHER, ANY = "other", "any template"
MAIN_FAMILIES = (TRITON, TMA, DECOMPOSE_K)
FAMILY_COLUMNS = (*MAIN_FAMILIES, OTHER)  # per-input columns (OTHER: the best of every other family)
COLUMNS = (*FAMILY_COLUMNS, ANY)  # per-group columns
#: (name, m*k*n below which an input is in it)
SIZE_CLASSES = (("small", 2**30), ("medium", 2**36), ("large", math.inf))
#: metadata keys that must agree for logs to be pooled (one device, one feature set, one timing method)
SAME_KEYS = ("name", "device_capa", "shared_memory", "numerical_features", "categorical_features", "timing")


def template_name(cid: str) -> str:
    """A choice id's template or kernel name: its ``_``-separated words before the first ``key=value``
    (``type=triton-mm_persistent_tma_BLOCK-M=..`` -> ``mm_persistent_tma``)."""
    text = cid.removeprefix("type=triton-")
    words = []
    for word in text.split("_"):
        if "=" in word:
            break
        words.append(word)
    return "_".join(words) or text


def family(choice: str) -> str:
    """The family of a choice id (``ah_plugin.use.choice_ids``); another template is named by its name."""
    cid = base_id(choice)
    if "decompose_k" in cid:
        return DECOMPOSE_K
    if cid.startswith("extern_"):
        return ATEN
    if cid.startswith("type=triton_"):
        return TRITON
    name = template_name(cid)
    return TMA if name == "mm_persistent_tma" else name


def row_min(times: np.ndarray) -> np.ndarray:
    """Per row of (inputs x choices) times: the minimum of the choices run (nan: none run; inf: all failed)."""
    if times.shape[1] == 0:
        return np.full(times.shape[0], np.nan)
    ran = ~np.isnan(times)
    return np.where(ran.any(axis=1), np.where(ran, times, np.inf).min(axis=1), np.nan)


@dataclass
class FamilyTimes:
    """Best time (ms) per input of aten and of each template family: nan not offered, inf failed."""

    features: pd.DataFrame  # one row per input
    aten: np.ndarray
    best: dict[str, np.ndarray]  # family -> times; main families first, then others by name

    def subset(self, mask: np.ndarray) -> "FamilyTimes":
        return FamilyTimes(self.features[mask].reset_index(drop=True), self.aten[mask],
                           {f: t[mask] for f, t in self.best.items()})

    def others(self) -> list[str]:
        return [f for f in self.best if f not in MAIN_FAMILIES]

    def column(self, name: str) -> np.ndarray:
        """One of ``COLUMNS``: a main family, the best of the others, or the best of every template."""
        names = {OTHER: self.others(), ANY: list(self.best)}.get(name, [name])
        present = [self.best[f] for f in names if f in self.best]
        return row_min(np.column_stack(present)) if present else np.full(len(self.aten), np.nan)


def load_frames(paths: list[str], allow_per_call: bool) -> tuple[pd.DataFrame, dict]:
    """Read every log (ValueError naming the file for a per-call log, a non-mm log, or metadata that
    differs from the first log's) and pool their rows."""
    frames, first = [], None
    for path in paths:
        log = read_log(path)
        require_mm_features(log.metadata, path)
        if log.metadata.get("timing") != METHOD_REPLAY and not allow_per_call:
            raise ValueError(f"{path}:1: not timed by CUDA-graph replay (metadata timing is "
                             f"{log.metadata.get('timing', 'absent')!r}, not {METHOD_REPLAY!r}); per-call times "
                             "mis-rank small GEMMs, so the report refuses them (--allow-per-call reads it anyway)")
        if first is not None and (diff := metadata_differences(first[1], log.metadata, SAME_KEYS)):
            raise ValueError(f"{path}:1: metadata differs from {first[0]}:1 in {', '.join(diff)}")
        first = first or (path, log.metadata)
        frames.append(log.frame)
    return pd.concat(frames, ignore_index=True), first[1]


def family_times(frame: pd.DataFrame, metadata: dict, where: str) -> FamilyTimes:
    """Median time per (input, choice), reduced to each family's best per input."""
    table = median_time_matrix(frame, feature_columns(metadata), SECTION, keys=input_keys(frame, metadata))
    require_usable(table, where, len(frame))
    families = [family(c) for c in table.choices]
    present = set(families)
    order = [f for f in MAIN_FAMILIES if f in present] + sorted(present - {ATEN, *MAIN_FAMILIES})
    best = {f: row_min(table.times[:, [j for j, g in enumerate(families) if g == f]]) for f in [ATEN, *order]}
    aten = best.pop(ATEN)
    return FamilyTimes(table.features, aten, best)


def dtype_label(row: pd.Series) -> str:
    dtype = str(row.get("mat1_dtype", row.get("dtype", "?"))).removeprefix("torch.")
    return dtype + ("+tf32" if str(row.get("using_tf32")) == "True" else "")


def layout(row: pd.Series) -> str:
    """``N`` (row-major), ``T`` (column-major, a transposed view) or ``S`` (strided) per operand."""
    def one(mat: str) -> str:
        s0, s1 = row.get(f"{mat}_stride_0"), row.get(f"{mat}_stride_1")
        return "?" if s0 is None else "N" if s1 == 1 else "T" if s0 == 1 else "S"
    return one("mat1") + one("mat2")


def size_class(m: int, k: int, n: int) -> str:
    return next(name for name, below in SIZE_CLASSES if m * k * n < below)


def input_rows(ft: FamilyTimes) -> list[dict]:
    """One dict per input, times in us (None: not offered or failed)."""
    columns = {c: ft.column(c) for c in COLUMNS}
    rows = []
    for i, (_, feat) in enumerate(ft.features.iterrows()):
        times = {f: float(ft.best[f][i]) for f in ft.best}
        offered = {f: t for f, t in {ATEN: float(ft.aten[i]), **times}.items() if math.isfinite(t)}
        m, k, n = (int(feat[c]) for c in ("m", "k", "n"))
        rows.append({"m": m, "k": k, "n": n, "dtype": dtype_label(feat), "layout": layout(feat),
                     "size": size_class(m, k, n), "aten_us": _us(ft.aten[i]),
                     "best_us": {c: _us(columns[c][i]) for c in FAMILY_COLUMNS},
                     "families_us": {f: _us(t) for f, t in times.items()},
                     "best_family": min(offered, key=offered.get) if offered else None,
                     "best_template_over_aten": md.finite(columns[ANY][i] / ft.aten[i])})
    return rows


def family_summary(name: str, times: np.ndarray, aten: np.ndarray, margin: float) -> dict:
    ratio = times / aten
    ran = ratio[~np.isnan(ratio)]
    return {"family": name, "inputs": len(aten), "offered": int(ran.size), "beats_aten": int((ran < 1 - margin).sum()),
            "median_ratio": md.finite(np.median(ran)) if ran.size else None,
            "best_ratio": md.finite(ran.min()) if ran.size else None,
            "oracle_ceiling": md.finite(geomean(np.fmin(times, aten) / aten))}


def summaries(ft: FamilyTimes, margin: float) -> list[dict]:
    """Per family: each main one, each other one by name, then any template (the whole oracle)."""
    names = [*MAIN_FAMILIES, *ft.others(), ANY]
    return [family_summary(f, ft.column(f), ft.aten, margin) for f in names]


def group_rows(ft: FamilyTimes, rows: list[dict], margin: float) -> list[dict]:
    """Oracle ceilings of every column within each dtype and each size class."""
    out = []
    for key in ("dtype", "size"):
        labels = np.array([r[key] for r in rows], dtype=object)
        values = sorted(set(labels)) if key == "dtype" else [s for s, _ in SIZE_CLASSES if s in set(labels)]
        for value in values:
            part = ft.subset(labels == value)
            anyone = family_summary(ANY, part.column(ANY), part.aten, margin)
            out.append({"group": f"{key} {value}", "inputs": anyone["inputs"], "beats_aten": anyone["beats_aten"],
                        "ceilings": {c: family_summary(c, part.column(c), part.aten, margin)["oracle_ceiling"]
                                     for c in COLUMNS}})
    return out


def report(paths: list[str], margin: float = 0.02, allow_per_call: bool = False) -> dict:
    frame, metadata = load_frames(paths, allow_per_call)
    ft = family_times(frame, metadata, ", ".join(paths))
    has_aten = np.isfinite(ft.aten) & (ft.aten > 0)
    ft = ft.subset(has_aten)
    rows = input_rows(ft)
    return {"logs": list(paths), "timing": metadata.get("timing", "per_call"), "margin": margin,
            "inputs_without_aten": int((~has_aten).sum()), "inputs": rows,
            "families": summaries(ft, margin), "groups": group_rows(ft, rows, margin)}


def _us(ms: float) -> float | None:
    return md.finite(ms * 1000.0)


def input_table(rows: list[dict], limit: int) -> list[str]:
    shown = sorted(rows, key=lambda r: math.inf if r["best_template_over_aten"] is None
                   else r["best_template_over_aten"])
    shown = shown[:limit] if limit > 0 else shown
    header = ["m x k x n", "dtype", "layout", "aten us", *[f"{c} us" for c in FAMILY_COLUMNS], "fastest",
              "best template / aten"]
    body = [[f"{r['m']}x{r['k']}x{r['n']}", r["dtype"], r["layout"], md.cell(r["aten_us"], ".1f"),
             *[md.cell(r["best_us"][c], ".1f") for c in FAMILY_COLUMNS], r["best_family"] or "-",
             md.cell(r["best_template_over_aten"], ".3f")] for r in shown]
    note = f"{len(shown)} of {len(rows)} inputs, lowest best template / aten first" + (
        "" if len(shown) == len(rows) else "; all in --json")
    return [f"Per input ({note}; layout N/T per operand: row-/column-major; '-': not offered or failed):", "",
            *md.table(header, body, text_columns=(0, 1, 2, len(header) - 2))]


def family_table(families: list[dict], margin: float) -> list[str]:
    header = ["family", "inputs offered", f"beats aten by > {margin:.0%}", "median best / aten",
              "lowest best / aten", "oracle ceiling min(aten, family) / aten"]
    body = [[f["family"], str(f["offered"]), str(f["beats_aten"]), md.cell(f["median_ratio"], ".3f"),
             md.cell(f["best_ratio"], ".3f"), md.cell(f["oracle_ceiling"], ".3f")] for f in families]
    return ["Per family (ratios of the family's best time to aten's; the ceiling is the geomean over all inputs):",
            "", *md.table(header, body)]


def group_table(groups: list[dict], margin: float) -> list[str]:
    header = ["group", "inputs", f"a template beats aten by > {margin:.0%}", *[f"ceiling {c}" for c in COLUMNS]]
    body = [[g["group"], str(g["inputs"]), str(g["beats_aten"]), *[md.cell(g["ceilings"][c], ".3f") for c in COLUMNS]]
            for g in groups]
    sizes = ", ".join(f"{name} < 2**{int(math.log2(below))}" for name, below in SIZE_CLASSES[:-1])
    return [f"Oracle ceiling by dtype and by size class (m*k*n: {sizes}, large above):", "", *md.table(header, body)]


def markdown(result: dict, command: str, rows_limit: int) -> str:
    lines = [TITLE, "", f"Command: `{command}`", "",
             f"{len(result['inputs'])} inputs from {', '.join(result['logs'])} (timing: {result['timing']}); "
             "each choice's time is the median of its repetitions."]
    if result["inputs_without_aten"]:
        lines.append(f"{result['inputs_without_aten']} input(s) without an aten time are left out.")
    lines += ["", *family_table(result["families"], result["margin"]), "",
              *group_table(result["groups"], result["margin"]), "", *input_table(result["inputs"], rows_limit)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = command_line.parser(PROG, __doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", metavar="LOG", help="collected mm log(s), plain or .gz; rows are pooled")
    parser.add_argument("--margin", type=float, default=0.02,
                        help="a family beats aten when its best time is below (1 - margin) x aten's")
    parser.add_argument("--rows", type=int, default=40,
                        help="per-input rows to print, lowest best template / aten first (0: all)")
    parser.add_argument("--results", default=None, help="also write the report as a section of this markdown file")
    parser.add_argument("--json", default=None, metavar="OUT.json", help="also write every figure as JSON")
    parser.add_argument("--allow-per-call", action="store_true",
                        help="read logs not timed by CUDA-graph replay (their small-GEMM ranks are unreliable)")
    args = parser.parse_args(argv)
    if not 0 <= args.margin < 1:
        return command_line.fail(PROG, ValueError(f"--margin {args.margin}: must be in [0, 1)"))
    try:
        result = report(args.logs, args.margin, args.allow_per_call)
    except (OSError, ValueError) as exc:  # AHLogError is a ValueError naming the file and line
        return command_line.fail(PROG, exc)
    argv_text = " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(result, f"{PROG} {argv_text}".strip(), args.rows)
    return publish_report(text, result, SECTION, args.json, args.results)


if __name__ == "__main__":
    sys.exit(main())
