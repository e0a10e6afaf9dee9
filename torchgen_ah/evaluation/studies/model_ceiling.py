"""The ceiling of quality mode's real-model bar: how much of a step GEMM selection could save at most.

    python -m torchgen_ah.evaluation.studies.model_ceiling --e2e E2E.jsonl [...] \\
        [--log datasets/h200_replay/h200_replay_mm.txt.gz] [--results benchmarks/RESULTS.md] [--json OUT]

Quality mode's model bar asks for a step 3% faster than min(off, default) on the geomean over models. A
step's GEMMs are what selection can change; per GEMM, the most it can save is cuBLAS's time minus the
fastest template's, where a template is faster. Per model of ``torchgen_ah.e2e_models``:

    saving = sum over the step's GEMMs of calls x max(0, cuBLAS - best template)   (replay-timed log)
    ceiling = (off's step - saving) / off's step                                   (off: e2e runs)

The step's GEMMs (``MODEL_GEMMS``) follow from the models' configurations in ``e2e_models`` (mm and addmm
only: attention's batched products and the ViT's patch convolution are not in the quality space's log).
The log times each GEMM by replay of one GEMM on the same inputs, so its weight stays in L2; in a step each
weight comes from HBM, which on an H200 adds about a microsecond to either kernel (RESULTS.md ``l2_state``)
and narrows a template's lead: the saving is an upper bound. Off's step is the median over off's processes
in the ``--e2e`` files (``e2e_models`` results lines). A GEMM the log does not hold is listed, not counted.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.e2e_models import QUALITY_STEP_BAR
from torchgen_ah.evaluation.studies.fast_heldout import describe
from torchgen_ah.evaluation.json_lines import read_json_lines
from torchgen_ah.evaluation.results_section import publish_report

PROG = "python -m torchgen_ah.evaluation.studies.model_ceiling"
SECTION = "model_ceiling"
TITLE = "### Quality mode's real-model ceiling: the most GEMM selection could save per step"
DEFAULT_LOG = "datasets/h200_replay/h200_replay_mm.txt.gz"


def _decoder(rows: int) -> list[tuple[str, int]]:
    """The Llama-style decoder (4 layers, hidden 2048, MLP 5632, 16 query and 16 key/value heads, vocabulary
    32000): per layer q, k, v, o (hidden x hidden), gate and up, down; the vocabulary projection once.
    Linear layers compute ``x @ W.t()``: B transposed (NT)."""
    return [(f"{rows}x2048x2048 bfloat16 NT", 16), (f"{rows}x2048x5632 bfloat16 NT", 8),
            (f"{rows}x5632x2048 bfloat16 NT", 4), (f"{rows}x2048x32000 bfloat16 NT", 1)]


_VIT_FORWARD = [("6304x384x1152 bfloat16 NT", 12), ("6304x384x384 bfloat16 NT", 12),
                ("6304x384x1536 bfloat16 NT", 12), ("6304x1536x384 bfloat16 NT", 12),
                ("32x384x1000 bfloat16 NT", 1)]
#: per e2e model, the GEMMs of one step as ``MxKxN dtype layout`` and calls per step. ViT-small: 12 blocks of
#: width 384 (qkv 1152, MLP 1536) over 32 x 197 tokens, a 1000-class head; its training step adds each
#: linear layer's input gradient (dY @ W: NN) and weight gradient (dY.t() @ X: TN). GPT-2 small: 12 blocks
#: of width 768 whose Conv1D layers are addmm with weights stored (in, out) (NN) over 8 x 256 tokens, and
#: the tied vocabulary projection (50257).
MODEL_GEMMS = {
    "gpt2": [("2048x768x2304 bfloat16 NN", 12), ("2048x768x768 bfloat16 NN", 12), ("2048x768x3072 bfloat16 NN", 12),
             ("2048x3072x768 bfloat16 NN", 12), ("2048x768x50257 bfloat16 NT", 1)],
    "vit": _VIT_FORWARD,
    "llama_prefill": _decoder(2048),
    "llama_decode": _decoder(64),
    "vit_train": _VIT_FORWARD + [
        ("6304x1152x384 bfloat16 NN", 12), ("6304x384x384 bfloat16 NN", 12), ("6304x1536x384 bfloat16 NN", 12),
        ("6304x384x1536 bfloat16 NN", 12), ("32x1000x384 bfloat16 NN", 1),
        ("1152x6304x384 bfloat16 TN", 12), ("384x6304x384 bfloat16 TN", 12), ("1536x6304x384 bfloat16 TN", 12),
        ("384x6304x1536 bfloat16 TN", 12), ("1000x32x384 bfloat16 TN", 1)],
}


def logged_times(log_path: str) -> dict:
    """{``MxKxN dtype layout``: (cuBLAS ms, fastest template ms or None)} for the log's inputs with a cuBLAS
    (``extern_mm``) time."""
    from torchgen_ah.mm import train_decision_mm

    table, _ = train_decision_mm.load_table([log_path], "model_ceiling")
    if "extern_mm" not in table.choices:
        raise ValueError(f"{log_path}: no extern_mm (cuBLAS) times")
    aten = table.choices.index("extern_mm")
    out = {}
    for i in range(len(table.keys)):
        times = table.times[i]
        if not (np.isfinite(times[aten]) and times[aten] > 0):
            continue
        others = [t for j, t in enumerate(times) if j != aten and np.isfinite(t) and t > 0]
        out[describe(dict(table.features.iloc[i].items()))] = (float(times[aten]), min(others) if others else None)
    return out


def off_steps(paths: list[str]) -> dict:
    """{model: off's median step ms} over the e2e results lines; ValueError naming the file and line of a bad
    one."""
    steps: dict = {}
    for path in paths:
        for row in read_json_lines(path, ("model", "mode"), "an e2e_models results line"):
            if row["mode"] == "off" and row.get("step_ms"):
                steps.setdefault(row["model"], []).append(float(row["step_ms"]))
    return {model: statistics.median(v) for model, v in steps.items()}


def model_rows(steps: dict, logged: dict) -> list[dict]:
    """Per model with an off step and known GEMMs: the step, the GEMMs' cuBLAS time per step, the most
    selection could save, the ceiling and the GEMMs not in the log."""
    rows = []
    for model, gemms in MODEL_GEMMS.items():
        if model not in steps:
            continue
        cublas_us = saving_us = 0.0
        missing, winners = [], []
        for gemm, calls in gemms:
            if gemm not in logged:
                missing.append(gemm)
                continue
            aten, best = logged[gemm]
            cublas_us += calls * aten * 1000
            if best is not None and best < aten:
                saving_us += calls * (aten - best) * 1000
                winners.append(f"{gemm} x{calls}: {aten * 1000:.1f} -> {best * 1000:.1f} us")
        step_us = steps[model] * 1000
        rows.append({"model": model, "step_ms": steps[model], "gemm_calls": sum(c for _, c in gemms),
                     "cublas_us": cublas_us, "saving_us": saving_us, "ceiling": (step_us - saving_us) / step_us,
                     "template_wins": winners, "not_in_log": missing})
    return rows


def markdown(rows: list[dict], command: str, sources: str) -> str:
    ceiling = geomean([r["ceiling"] for r in rows])
    lines = [f"Command: `{command}`", "", sources, "",
             f"Over {len(rows)} models, the step a perfect GEMM pick could reach is **{ceiling:.3f}x** off's on "
             f"the geomean, with the log's warm-L2 times (an upper bound); the quality bar asks for "
             f"{QUALITY_STEP_BAR:.2f}x min(off, default).", "",
             "| model | off step ms | GEMM calls | their cuBLAS us | most a pick saves, us | ceiling | where a template wins | not in the log |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['step_ms']:.3f} | {r['gemm_calls']} | {r['cublas_us']:.0f} | "
                     f"{r['saving_us']:.1f} | {r['ceiling']:.3f} | {'; '.join(r['template_wins']) or '-'} | "
                     f"{', '.join(r['not_in_log']) or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--e2e", nargs="+", required=True, help="e2e_models results lines with off's steps")
    parser.add_argument("--log", default=DEFAULT_LOG, help="replay-timed log with the models' GEMMs "
                        "(default: %(default)s)")
    parser.add_argument("--results", help="also write the model_ceiling section of this markdown file")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    command = f"{PROG} " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        rows = model_rows(off_steps(args.e2e), logged_times(args.log))
    except (OSError, ValueError) as exc:
        print(f"model_ceiling: {exc}", file=sys.stderr)
        return 1
    if not rows:
        print(f"model_ceiling: no off step of a known model ({', '.join(MODEL_GEMMS)}) in "
              f"{', '.join(args.e2e)}", file=sys.stderr)
        return 1
    sources = (f"Off's steps: {', '.join(f'`{p}`' for p in args.e2e)} (median over off's processes); "
               f"GEMM times: `{args.log}`.")
    return publish_report(f"{TITLE}\n\n" + markdown(rows, command, sources), {"rows": rows}, SECTION, args.json,
                          args.results)


if __name__ == "__main__":
    sys.exit(main())
