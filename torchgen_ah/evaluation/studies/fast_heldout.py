"""Fast mode on inputs its ranking never saw: five folds by input, replayed on the replay-timed log.

The shipped H200 ranking is trained on every input of its log, so the per-shape tables of
``compile_cost`` are mostly in-sample. This check trains one artifact per fold (``--holdout
sha1mod5:B``, B = 0..4: every input is held out exactly once) and replays fast mode's decision on the
inputs that fold held out, from the log's own median times:

* the ranking puts aten first: aten alone (``extern_mm``), nothing compiled;
* a template first: that template and aten, timed against each other; the template wins only when it
  beats aten by the aten margin (``ah_plugin.use.aten_margin``), as in a compile. With ``--backed-only``
  (``AH_PLUGIN_TIME_UNBACKED=off``) only where the leaf's training data back it (``ranking.supported``),
  else aten alone.

Reported per input: what was kept, the resulting time over cuBLAS's (``extern_mm``) and over the best
candidate of the log. The L2 rule (a compile-time rule about which GEMMs are timed at all) is not applied:
this scores the ranking. Usage::

    python -m torchgen_ah.evaluation.studies.fast_heldout datasets/h200_replay/h200_replay_mm.txt.gz \\
        datasets/h200_replay/h200_replay_unaligned_mm.txt.gz --alignment-features --out fast_heldout_out
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile

import numpy as np

from ah_plugin.use import aten_margin, ranking
from ah_plugin.config.settings import Settings
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.heldout import ROTATIONS, is_heldout
from torchgen_ah.data.log_files import log_stem
from torchgen_ah.mm import train_decision_mm
from torchgen_ah.training.train_decision import GRIDS

PROG = "python -m torchgen_ah.evaluation.studies.fast_heldout"
ATEN = "extern_mm"


def _load_class(path: str, name: str):
    spec = importlib.util.spec_from_file_location(f"_fast_heldout_{name}_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)()


def fast_outcome(ranked: list[tuple[str, float]], times: dict[str, float], margin: float,
                 confidence: float = math.inf, support: dict | None = None,
                 time_unbacked: bool = True) -> tuple[str, float]:
    """(what fast mode keeps, the time it ends with) for one input, from its measured ``times``;
    ``confidence``: the share at which a template is kept alone (``AH_PLUGIN_CONFIDENCE``; never by default),
    where the leaf's training data (``support``) back it; ``time_unbacked``: a template they do not back is
    timed against aten (fast mode's default on a GPU), else aten is kept alone."""
    kept = ranking.choose_fast(ranked, list(times), confidence, trust_templates=True, support=support,
                               time_unsupported=time_unbacked)
    if len(kept) == 1:
        return ("aten" if ranking.is_aten_choice(kept[0]) else "template alone"), times[kept[0]]
    timed = {c: times[c] for c in kept}
    pick = aten_margin.winner(timed, margin)
    return ("template kept" if not ranking.is_aten_choice(pick) else "template timed, aten kept"), timed[pick]


def describe(features: dict) -> str:
    """``MxKxN dtype LAYOUT`` of one logged input (layout from the operands' contiguity: N row-major,
    T transposed), so that inputs differing only in layout are told apart."""
    layout = "".join("N" if str(features[f"mat{i}_iscontig"]) == "True" else "T" for i in (1, 2))
    dtype = str(features["mat1_dtype"]).replace("torch.", "")
    return f"{features['m']}x{features['k']}x{features['n']} {dtype} {layout}"


def evaluate(log_paths: list[str], alignment: bool, margin: float, grid: str = "sparse", log=print,
             confidence: float = math.inf, time_unbacked: bool = True) -> list[dict]:
    """One row per input of the logs that has a cuBLAS (``extern_mm``) time: its fold, what fast mode kept
    there and the times."""
    table, _ = train_decision_mm.load_table(log_paths, log_stem(log_paths[0]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="fast_heldout_") as tmp:
        for fold, holdout in enumerate(ROTATIONS):
            out = os.path.join(tmp, str(fold))
            train_decision_mm.run(log_paths, "FoldRanking", ranking=10, out_dir=out, holdout=holdout,
                                  grid=GRIDS[grid], alignment=alignment, log=lambda *_: None)
            artifact = _load_class(os.path.join(out, "_FoldRanking.py"), "FoldRanking")
            held = is_heldout(table.keys, holdout)
            for i in np.flatnonzero(held):
                times = {c: float(t) for c, t in zip(table.choices, table.times[i])
                         if np.isfinite(t) and t > 0}
                features = {k: v for k, v in table.features.iloc[i].items()}
                if ATEN not in times:
                    log(f"fold {fold}: {describe(features)} left out: no {ATEN} time to compare with")
                    continue
                kept, time = fast_outcome(artifact.rank(features), times, margin, confidence,
                                          artifact.support(features), time_unbacked)
                rows.append({"fold": fold, "input": describe(features), "kept": kept, "us": time * 1000,
                             "cublas_us": times[ATEN] * 1000, "best_us": min(times.values()) * 1000})
            log(f"fold {fold}: {int(held.sum())} inputs held out")
    return rows


def markdown(rows: list[dict], command: str, confidence: float = math.inf, time_unbacked: bool = True) -> str:
    vs_aten = [r["us"] / r["cublas_us"] for r in rows]
    vs_best = [r["us"] / r["best_us"] for r in rows]
    oracle = [min(r["cublas_us"], r["best_us"]) / r["cublas_us"] for r in rows]
    kinds = {k: sum(r["kept"] == k for r in rows) for k in sorted({r["kept"] for r in rows})}
    unbacked = "" if time_unbacked else " where its leaf's training data back it, aten alone where they do not"
    how = (f"each top template timed against aten{unbacked}" if math.isinf(confidence) else
           f"a top template kept alone at a share of {confidence:g} or more where its leaf's training data back "
           f"it, else timed against aten{unbacked}")
    lines = [f"Command: `{command}`", "",
             f"{len(rows)} inputs, each held out once (5 folds by input); {how}. Fast mode's result over "
             "cuBLAS's time: "
             f"geomean {geomean(vs_aten):.3f}x, worst {max(vs_aten):.3f}x, best {min(vs_aten):.3f}x; over the "
             f"log's best candidate: geomean {geomean(vs_best):.3f}x (the best candidate is "
             f"{geomean(oracle):.3f}x cuBLAS's on the geomean).", "",
             "Kept: " + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ".", "",
             "| input | fold | kept | fast us | cuBLAS us | best us | fast / cuBLAS |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: r["us"] / r["cublas_us"]):
        lines.append(f"| {r['input']} | {r['fold']} | {r['kept']} | {r['us']:.1f} | {r['cublas_us']:.1f} | "
                     f"{r['best_us']:.1f} | {r['us'] / r['cublas_us']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fast mode's decisions on held-out inputs (5 folds by input), replayed on a replay-timed mm log.")
    parser.add_argument("logs", nargs="+", help="replay-timed mm logs of one device, trained on as one (e.g. "
                        "datasets/h200_replay/h200_replay_mm.txt.gz)")
    parser.add_argument("--alignment-features", action="store_true",
                        help="train the folds with the operands' alignment features (as the shipped H200 ranking)")
    parser.add_argument("--margin", type=float, default=Settings().aten_margin,
                        help="aten margin a template must beat (default: %(default)s, the plugin's)")
    parser.add_argument("--confidence", type=float, default=math.inf,
                        help="share at which a template is kept alone, untimed (AH_PLUGIN_CONFIDENCE; default: "
                             "never, as on a GPU)")
    parser.add_argument("--backed-only", action="store_true",
                        help="time a template against aten only where the leaf's data back it, else keep aten alone "
                             "(AH_PLUGIN_TIME_UNBACKED=off; default: every top template timed, as fast mode on a GPU)")
    parser.add_argument("--out", default=None, help="folder for fast_heldout.md (default: print only)")
    args = parser.parse_args(argv)
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        rows = evaluate(args.logs, args.alignment_features, args.margin, log=lambda m: print(m, file=sys.stderr),
                        confidence=args.confidence, time_unbacked=not args.backed_only)
    except (OSError, ValueError, KeyError) as exc:
        print(f"fast_heldout: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(f"fast_heldout: {', '.join(args.logs)}: no input with a cuBLAS ({ATEN}) time", file=sys.stderr)
        return 1
    text = markdown(rows, command, args.confidence, not args.backed_only)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "fast_heldout.md"), "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
