"""The held-out quality protocol: train on all but the sha1-held-out inputs, score the held-out inputs.

For A100 and H100: an input (its feature values joined with "," as in the row) is held out when
int(sha1(key), 16) % 5 == 0, in each of the three official files. We train on the rest (main file plus
TIMM and HF as extra data, weight 3) with the shipped flags, then score each file's held-out inputs:
top-10 hit (the fastest time is among the first 10 ranked choices measured for the input, plus
extern_mm), regret of that list (geomean, max) and of the first choice alone. Upstream's figures under
the same protocol are embedded; torch's shipped artifacts (trained on most of these inputs: a ceiling,
not a peer) are scored on the same inputs through their own get_decisions_ranked(AHContext).

    python benchmarks/train_quality.py [--datasets datasets]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from torchgen_ah.data.heldout import is_heldout
from torchgen_ah.evaluation.results_section import publish
from torchgen_ah.mm import train_decision_mm as mm
from torchgen_ah.training.ranker_scoring import shipped_orders, with_unranked_column
from torchgen_ah.training.train_decision import evaluate_orders

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "RESULTS.md")

# file -> (inputs, top-10 hit, regret gmean, regret max, top-1 regret gmean, always-extern_mm top-1 gmean)
UPSTREAM = {
    "a100_mm": (509, 0.9961, 1.0001, 1.025, 1.022, 1.022),
    "a100_timm": (185, 0.9243, 1.0062, 2.424, 1.093, 1.112),
    "a100_hf": (49, 1.0, 1.0, 1.0, 1.027, 1.046),
    "h100_mm": (65, 0.9846, 1.0002, 1.011, 1.021, 1.019),
    "h100_timm": (185, 0.9568, 1.0014, 1.118, 1.038, 1.095),
    "h100_hf": (55, 1.0, 1.0, 1.0, 1.091, 1.077),
}
FILES = {"mm": "{d}_mm.txt", "timm": "{d}_timm_train_mm.txt", "hf": "{d}_hf_train_mm.txt"}


def device_rows(device: str, data_dir: str, k: int = 10) -> list[dict]:
    paths = {kind: os.path.join(data_dir, device, pat.format(d=device)) for kind, pat in FILES.items()}
    with tempfile.TemporaryDirectory() as out:
        run = mm.run(paths["mm"], f"MMRanking{device.upper()}Heldout", ranking=k,
                     data=[("train_timm", paths["timm"]), ("train_hf", paths["hf"])], out_dir=out,
                     holdout="sha1mod5", log=lambda *a: None)
    model = run.result.model
    names = {f"{device}_mm": "mm", "train_timm": "timm", "train_hf": "hf"}
    ours = {m.name.replace(" held-out", ""): m for m in run.result.metrics if m.name.endswith("held-out")}
    rows = []
    for kind in ("mm", "timm", "hf"):
        name = [n for n, v in names.items() if v == kind][0]
        table, _ = mm.load_table(paths[kind], name)
        held = table.subset(is_heldout(table.keys, "sha1mod5"))
        times = held.aligned_times(model.choices)
        shipped = shipped_orders(device, held, model.choices)
        ship = None
        if shipped is not None:
            ship = evaluate_orders("shipped", shipped, with_unranked_column(times), k,
                                   model.choices.index("extern_mm"))
        rows.append({"file": f"{device}_{kind}", "ours": ours[name], "shipped": ship,
                     "params": run.result.best_params})
    return rows


def fmt(m) -> list[str]:
    return [f"{m.hit_rate:.4f} ({m.hits})", f"{m.regret_gmean:.4f}", f"{m.regret_max:.3f}",
            f"{m.top1_gmean:.4f}", f"{m.default_top1_gmean:.4f}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=os.path.join(ROOT, "datasets"),
                        help="folder holding a100/ and h100/ (python -m torchgen_ah.get_mm_dataset)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    rows = device_rows("a100", args.datasets) + device_rows("h100", args.datasets)
    head = ["held-out file", "inputs", "who", "top-10 hit (hits)", "regret gmean", "regret max",
            "top-1 regret gmean", "always extern_mm"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    checks = []
    pooled = pooled_up = 0
    for r in rows:
        m, up = r["ours"], UPSTREAM[r["file"]]
        up_hits = round(up[1] * up[0])
        pooled += m.hits
        pooled_up += up_hits
        lines.append(f"| {r['file']} | {m.inputs} | ours | " + " | ".join(fmt(m)) + " |")
        lines.append(f"| {r['file']} | {up[0]} | upstream trainer | {up[1]:.4f} ({up_hits}) | {up[2]:.4f} | "
                     f"{up[3]:.3f} | {up[4]:.3f} | {up[5]:.3f} |")
        if r["shipped"] is not None:
            lines.append(f"| {r['file']} | {r['shipped'].inputs} | torch shipped (ceiling) | "
                         + " | ".join(fmt(r["shipped"])) + " |")
        checks.append((f"{r['file']}: hits >= upstream - 1", m.hits >= up_hits - 1))
        checks.append((f"{r['file']}: regret gmean <= upstream", round(m.regret_gmean, 4) <= up[2]))
        checks.append((f"{r['file']}: regret max < 1.25", m.regret_max < 1.25))
        checks.append((f"{r['file']}: top-1 gmean < always extern_mm", m.top1_gmean < m.default_top1_gmean))
    checks.insert(0, (f"pooled hits {pooled} >= upstream {pooled_up}", pooled >= pooled_up))
    params = "; ".join(f"{d}: `{r['params']}`" for d, r in (("A100", rows[0]), ("H100", rows[3])))
    body = "\n".join([
        "## Trainer quality: issue-2 held-out protocol (sha1(key) % 5 == 0)", "",
        "Command: `python benchmarks/train_quality.py` (data from `python -m torchgen_ah.get_mm_dataset`). "
        "Top-10 list: the first 10 ranked choices with a finite time "
        "for the input, plus `extern_mm`; regret = best time in the list / best time. Grid point chosen "
        f"by 4-fold cross-validation on the training inputs: {params}.", "",
        *lines, "",
        *[f"- {'PASS' if ok else 'FAIL'}: {what}" for what, ok in checks],
    ])
    publish(RESULTS, "train_quality", body, write=not args.no_write)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
