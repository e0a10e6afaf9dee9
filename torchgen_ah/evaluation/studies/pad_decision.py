"""Shape padding in fast mode, scored on measured times: the pad_mm pass's own rule against fast mode's
padding opinion, per unaligned GEMM.

    python -m torchgen_ah.evaluation.studies.pad_decision --timings family_timings.json \\
        [--log datasets/h200_replay/h200_replay_unaligned_mm.txt.gz] [--results benchmarks/RESULTS.md]

Inputs, both replay-timed on one GPU:

* ``--timings``: ``torchgen_ah.evaluation.studies.family_timings`` padding rows (``--pad-to 8``, as the pass pads
  bf16): cuBLAS on the GEMM as it is, and padded at run time (both operands copied every call, what the pass
  benchmarks for a weight that is a graph input);
* ``--log``: a collection log of the same GEMMs timed unpadded (``gen_data_mm --shape-padding off``), for
  the Triton templates' times.

Per GEMM (bf16, row-major operands, the ones in both files):

* **the pass alone**: it pads when cuBLAS as it is takes more than 1.1x the padded time; fast mode then
  autotunes the padded GEMM (scored as cuBLAS padded at run time: the padded twin's templates are not in
  the log) or, unpadded, times the ranking's first template against cuBLAS with the aten margin;
* **with fast mode's opinion** (``RankingPolicy.padding_opinion`` of the packaged artifacts): no padding
  where a template is ranked first on the GEMM and on its padded twin, the pass's rule elsewhere.

Where a rule pads, the GEMM is scored as cuBLAS padded at run time: an upper bound, since fast mode then
times the padded twin's first template against it, and those templates' times are not measured here. So
a GEMM the pass pads and the opinion does not can look better for the opinion than it is. The shipped H200
ranking was trained on the unaligned log, so this scores the rule, not the ranking out of sample
(``torchgen_ah.evaluation.studies.fast_heldout`` does that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from ah_plugin.collect import features
from ah_plugin.policy import AutotuneRequest
from ah_plugin.use.ranking import RankingPolicy, UseOptions
from ah_plugin.config.settings import Settings
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.studies.fast_heldout import ATEN, fast_outcome
from torchgen_ah.mm import train_decision_mm

PROG = "python -m torchgen_ah.evaluation.studies.pad_decision"
DEFAULT_LOG = os.path.join("datasets", "h200_replay", "h200_replay_unaligned_mm.txt.gz")
PASS_FACTOR = 1.1  # the pass pads when the unpadded time exceeds the padded one by this factor
ALIGNMENT = 8  # elements: what the pass aligns bf16/fp16 dimensions to


def _padded(size: int) -> int:
    return size + (-size) % ALIGNMENT


def _request(m: int, k: int, n: int, metadata: dict) -> AutotuneRequest:
    tensors = [{"size": [m, k], "stride": [k, 1], "dtype": "torch.bfloat16"},
               {"size": [k, n], "stride": [n, 1], "dtype": "torch.bfloat16"}]
    values, num, cat = features.op_features("mm", tensors)
    meta = features.metadata("mm", num, cat, tuple(metadata["device_capa"]), metadata["shared_memory"],
                             metadata["device_name"])
    return AutotuneRequest("mm", features.ordered_features(values, num, cat), meta, [], "padding", tensors)


def _logged_times(log_path: str) -> tuple[dict, dict]:
    """{(m, k, n): {choice: ms}} of the log's bf16 row-major inputs, and the log's metadata."""
    table, metadata = train_decision_mm.load_table([log_path], "pad_decision")
    out = {}
    for i in range(len(table.keys)):
        row = table.features.iloc[i]
        if str(row["mat1_dtype"]) != "torch.bfloat16" or str(row["mat1_iscontig"]) != "True" or \
                str(row["mat2_iscontig"]) != "True":
            continue
        out[(int(row["m"]), int(row["k"]), int(row["n"]))] = {
            c: float(t) for c, t in zip(table.choices, table.times[i]) if np.isfinite(t) and t > 0}
    return out, metadata


def score(padding_rows: list[dict], log_path: str, device_name: str, margin: float) -> list[dict]:
    """One row per GEMM in both inputs: the times, each rule's decision and the time it ends with (us)."""
    logged, metadata = _logged_times(log_path)
    metadata = dict(metadata, device_name=device_name)
    policy = RankingPolicy(options=UseOptions(enabled=True, fast=True))
    rows = []
    for r in padding_rows:
        shape = (int(r["m"]), int(r["k"]), int(r["n"]))
        times = logged.get(shape)
        if times is None or ATEN not in times:
            continue
        unpadded = _request(*shape, metadata)
        padded = _request(*(_padded(s) for s in shape), metadata)
        artifact = policy.artifact_for("mm", unpadded.metadata)
        if artifact is None:
            raise ValueError(f"no packaged artifact ranks mm on {device_name} {metadata['device_capa']}")
        kept, unpadded_ms = fast_outcome(artifact.rank(unpadded.features), times, margin)
        pass_pads = r["cublas_us"] > PASS_FACTOR * r["padded_runtime_us"]
        opinion = policy.padding_opinion(unpadded, padded)
        fast_pads = pass_pads if opinion is None else opinion
        padded_us, unpadded_us = r["padded_runtime_us"], unpadded_ms * 1000
        rows.append({"shape": "x".join(map(str, shape)), "cublas_us": r["cublas_us"], "padded_us": padded_us,
                     "template_us": min(t for c, t in times.items() if c != ATEN) * 1000 if len(times) > 1
                     else float("nan"), "kept_unpadded": kept, "unpadded_us": unpadded_us,
                     "pass_pads": pass_pads, "opinion": opinion,
                     "pass_us": padded_us if pass_pads else unpadded_us,
                     "fast_us": padded_us if fast_pads else unpadded_us})
    return rows


def markdown(rows: list[dict], command: str, source: str = "") -> str:
    def decision(pads):
        return "pad" if pads else "no pad"

    pass_ratio = [r["pass_us"] / r["cublas_us"] for r in rows]
    fast_ratio = [r["fast_us"] / r["cublas_us"] for r in rows]
    best = [min(r["cublas_us"], r["padded_us"], r["unpadded_us"]) for r in rows]
    lines = [f"Command: `{command}`" + (f" ({source})" if source else ""), "",
             f"{len(rows)} unaligned bf16 GEMMs; us per call by CUDA-graph replay. Over cuBLAS as it is, geomean: "
             f"the pass alone {geomean(pass_ratio):.3f}x, with fast mode's opinion {geomean(fast_ratio):.3f}x; "
             f"GEMMs where the opinion ends above the best of the three outcomes: "
             f"{sum(r['fast_us'] > b * 1.001 for r, b in zip(rows, best))} (the pass alone: "
             f"{sum(r['pass_us'] > b * 1.001 for r, b in zip(rows, best))}). Where a rule pads, the GEMM is "
             "scored as cuBLAS padded at run time, an upper bound: the padded twin's templates, which fast mode "
             "would time against it, are not measured.", "",
             "| m x k x n | cuBLAS as is | padded at run time | best template | fast mode unpadded (kept) | "
             "the pass | fast mode's opinion | ends, pass alone | ends, with the opinion |",
             "| --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: |"]
    for r in rows:
        opinion = "-" if r["opinion"] is None else decision(r["opinion"])
        lines.append(f"| {r['shape']} | {r['cublas_us']:.1f} | {r['padded_us']:.1f} | {r['template_us']:.1f} | "
                     f"{r['unpadded_us']:.1f} ({r['kept_unpadded']}) | {decision(r['pass_pads'])} | {opinion} | "
                     f"{r['pass_us']:.1f} | {r['fast_us']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG,
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--timings", required=True,
                        help="family_timings.json with padding rows "
                             "(python -m torchgen_ah.evaluation.studies.family_timings --pad-to 8 ...)")
    parser.add_argument("--log", default=DEFAULT_LOG, help="replay-timed log of the same GEMMs, unpadded "
                        "(default: %(default)s)")
    parser.add_argument("--margin", type=float, default=Settings().aten_margin,
                        help="aten margin a template must beat (default: %(default)s, the plugin's)")
    parser.add_argument("--results", default=None, help="also write the pad_decision section of this markdown file")
    args = parser.parse_args(argv)
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        with open(args.timings, encoding="utf-8") as f:
            timings = json.load(f)
        padding = timings["padding"]
        if padding and padding[0].get("pad_to") != ALIGNMENT:
            raise ValueError(f"{args.timings}: padded to multiples of {padding[0].get('pad_to')}; the pass pads "
                             f"bf16 to {ALIGNMENT} (run family_timings with --pad-to {ALIGNMENT})")
        rows = score(padding, args.log, timings.get("device", "NVIDIA H200"), args.margin)
    except (OSError, ValueError, KeyError) as exc:
        print(f"pad_decision: {exc if not isinstance(exc, KeyError) else f'{args.timings}: no {exc} field'}",
              file=sys.stderr)
        return 1
    if not rows:
        print(f"pad_decision: no GEMM of {args.timings} is in {args.log} with a cuBLAS time", file=sys.stderr)
        return 1
    source = (f"padding timed on {timings.get('device', '?')}, torch {timings.get('torch', '?')}, by "
              "`python -m torchgen_ah.evaluation.studies.family_timings --pad-to 8 --pad-shapes ...`; "
              "the log's templates unpadded")
    text = markdown(rows, command, source)
    print(text)
    if args.results:
        from torchgen_ah.evaluation.results_section import update_results_section

        update_results_section(args.results, "pad_decision",
                               "### Shape padding in fast mode: the pass's rule and fast mode's opinion\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
