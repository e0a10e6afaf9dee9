"""``python -m torchgen_ah.moe.gen_data_grouped_mm``: collect a mixture of experts' grouped-GEMM autotuning data.

Each input is one expert projection, ``torch._grouped_mm(x, w, offs=offs)``: ``x`` holds the tokens routed to
the experts (rows), grouped by expert, ``w`` every expert's weight, ``offs`` where each expert's rows end. It
is compiled with ``mode="max-autotune-no-cudagraphs"`` ``--num-reps`` times, every compile autotuning afresh,
and the plugin's collector (``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=grouped_mm``) appends one row per timed
candidate to ``-o``: the generic columns of the three inputs (sizes, strides, dtypes; the expert count is
``in2_size_0``), since the split of the rows between experts is data, unknown when Inductor autotunes. Inputs,
a pure function of (seed, index):

* the first ``len(MODEL_CALLS)`` indices are real models' expert projections (``MOE_LAYOUTS``: Mixtral,
  Qwen-MoE, DeepSeek-V2-Lite, OLMoE, gpt-oss, Qwen3-MoE) at batched decode and prefill;
* the rest are sampled: a layout, its up (gate and up fused) or down projection, and the routed rows.

The rows are split unevenly between the experts (``autotune_families._routed_offsets``; multiples of 16, as
the kernels align them). Built on ``WorkloadRunner`` (a ``BenchmarkRunner``: warm workers, journal, resumption,
fault isolation, time budget). A GPU only: Inductor autotunes grouped GEMMs on CUDA.
"""

from __future__ import annotations

import random
import sys

from torchgen_ah.datagen.workload_runner import WorkloadRunner

COLLECTED = "grouped_mm"

# (name, experts, hidden size, one expert's MLP size, experts per token)
MOE_LAYOUTS = (
    ("mixtral-8x7b", 8, 4096, 14336, 2), ("mixtral-8x22b", 8, 6144, 16384, 2),
    ("qwen1.5-moe-a2.7b", 60, 2048, 1408, 4), ("deepseek-v2-lite", 64, 2048, 1408, 6),
    ("olmoe-1b-7b", 64, 2048, 1024, 8), ("gpt-oss-20b", 32, 2880, 2880, 4), ("qwen3-30b-a3b", 128, 2048, 768, 8),
)
PROJECTIONS = ("up", "down")  # up: hidden -> 2 x MLP (gate and up fused); down: MLP -> hidden
# real models' calls: (layout name, projection, tokens in the batch)
MODEL_CALLS = tuple((name, projection, tokens) for name in ("mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2-lite",
                                                           "olmoe-1b-7b", "gpt-oss-20b", "qwen3-30b-a3b")
                    for projection in PROJECTIONS for tokens in (64, 4096))
TOKENS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
ROW_ALIGN = 16
DEFAULT_MAX_ELEMENTS = 2 ** 31  # rows x (k + n) of one call, with the weights' experts x k x n


def layout(name: str) -> tuple:
    return next(entry for entry in MOE_LAYOUTS if entry[0] == name)


def sample_call(seed: int, index: int, max_elements: int = DEFAULT_MAX_ELEMENTS) -> dict:
    """Input ``index`` (a pure function of ``seed`` and ``index``) as a JSON-ready dict."""
    if index < len(MODEL_CALLS):
        name, projection, tokens = MODEL_CALLS[index]
    else:
        rng = random.Random(f"ah-datagen:grouped_mm:{int(seed)}:{int(index)}")
        name, projection = rng.choice(MOE_LAYOUTS)[0], rng.choice(PROJECTIONS)
        tokens = rng.choice(TOKENS)
    _, experts, hidden, mlp, per_token = layout(name)
    k, n = (hidden, 2 * mlp) if projection == "up" else (mlp, hidden)
    rows = max(ROW_ALIGN, -(-tokens * per_token // ROW_ALIGN) * ROW_ALIGN)
    while rows > ROW_ALIGN and rows * (k + n) + experts * k * n > max_elements:
        rows = max(ROW_ALIGN, rows // 2 // ROW_ALIGN * ROW_ALIGN)
    return {"model": name, "projection": projection, "tokens": tokens, "rows": rows, "experts": experts,
            "k": k, "n": n}


def workload(spec: dict, device: str):
    """The ``autotune_families`` workload of one input (the map's own grouped-GEMM builder)."""
    from torchgen_ah.evaluation.studies.autotune_families import _grouped

    return _grouped(describe(spec), spec["rows"], spec["experts"], spec["k"], spec["n"], device=device)


def describe(spec: dict) -> str:
    return (f"{spec['model']} {spec['projection']} {spec['rows']} rows {spec['experts']} experts "
            f"{spec['k']}->{spec['n']}")


class BenchmarkRunnerGroupedMM(WorkloadRunner):
    name = "gen_data_grouped_mm"
    command = "python -m torchgen_ah.moe.gen_data_grouped_mm"
    description = "Generate grouped-GEMM (mixture of experts) AutoHeuristic data with the plugin's collector."
    collected = COLLECTED
    what = "grouped GEMMs"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--max-elements", type=int, default=DEFAULT_MAX_ELEMENTS,
                            help="elements of a sampled call's rows and weights at most (rows are halved to fit)")

    def total_inputs(self, args) -> int:
        return len(MODEL_CALLS) + 48 if args.num_samples is None else args.num_samples

    def make_input(self, index: int, args) -> dict:
        return sample_call(args.seed, index, args.max_elements)

    def describe_input(self, spec: dict) -> str:
        return describe(spec)

    def workload(self, spec: dict, device: str):
        return workload(spec, device)


def main(argv=None) -> int:
    return BenchmarkRunnerGroupedMM().run(argv)


if __name__ == "__main__":
    sys.exit(main())
