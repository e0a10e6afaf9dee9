"""``python -m torchgen_ah.flex.gen_data_flex``: collect FlexAttention autotuning data with the plugin's collector.

Each input is one FlexAttention call, compiled with ``mode="max-autotune-no-cudagraphs"`` ``--num-reps``
times, every compile autotuning afresh: the plugin's collector (``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=
flex_attention,flex_decoding,flex_attention_backward``) appends one row per timed config to ``-o`` (the
per-kernel logs beside it: ``<out>`` holds the first kernel's name, see ``--help``'s ``-o``), with the call's
features (``ah_plugin.use.flex_ranking.flex_features``) and the configs' ids. Inputs, a pure function of (seed,
index):

* the first ``len(MODEL_CALLS)`` indices are calls of real models (``MODEL_CALLS``: Llama-3, Mistral,
  Qwen2, Gemma-2, GPT-2 and BERT head layouts at their usual sequence lengths, forward and decoding);
* the rest are sampled: the kernel (forward, decoding, or with ``--backward`` the training step), a head
  layout of those models, a batch, and sequence lengths, within ``--max-elements`` query-key pairs per call.

Masks: forward calls are causal (a block mask), decoding calls attend to the whole cache. Inductor times the
configs on made-up dense block masks whatever the real mask is, so the mask changes the kernel's code only
through whether a block mask is present. Built on ``WorkloadRunner`` (a ``BenchmarkRunner``: warm workers,
journal, resumption, fault isolation, time budget).
"""

from __future__ import annotations

import random
import sys

from torchgen_ah.datagen.workload_runner import WorkloadRunner

COLLECTED = "flex_attention,flex_decoding,flex_attention_backward"

# (name, query heads, key/value heads, head dim)
HEAD_LAYOUTS = (
    ("llama3-8b", 32, 8, 128), ("llama3.2-1b", 32, 8, 64), ("mistral-7b", 32, 8, 128), ("qwen2-7b", 28, 4, 128),
    ("gemma2-2b", 8, 4, 256), ("gpt2", 12, 12, 64), ("bert-base", 12, 12, 64), ("llama2-7b", 32, 32, 128),
)
# real models' calls: (kernel, layout name, batch, query length, key length)
MODEL_CALLS = (
    ("decoding", "llama3-8b", 1, 1, 8192), ("decoding", "llama3-8b", 8, 1, 4096),
    ("decoding", "llama3-8b", 32, 1, 2048), ("decoding", "llama3.2-1b", 16, 1, 4096),
    ("decoding", "mistral-7b", 4, 1, 16384), ("decoding", "qwen2-7b", 8, 1, 8192),
    ("decoding", "gemma2-2b", 8, 1, 4096), ("decoding", "llama2-7b", 4, 1, 4096),
    ("forward", "llama3-8b", 1, 8192, 8192), ("forward", "llama3-8b", 4, 2048, 2048),
    ("forward", "llama3.2-1b", 8, 1024, 1024), ("forward", "mistral-7b", 2, 4096, 4096),
    ("forward", "qwen2-7b", 4, 2048, 2048), ("forward", "gemma2-2b", 4, 2048, 2048),
    ("forward", "gpt2", 16, 1024, 1024), ("forward", "bert-base", 32, 512, 512),
)
BATCHES = (1, 2, 4, 8, 16, 32, 64)
LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_MAX_ELEMENTS = 2 ** 31  # batch x heads x query length x key length of one call


def layout(name: str) -> tuple:
    return next(entry for entry in HEAD_LAYOUTS if entry[0] == name)


def sample_call(seed: int, index: int, backward: bool, max_elements: int) -> dict:
    """Input ``index`` (a pure function of ``seed`` and ``index``) as a JSON-ready dict."""
    if index < len(MODEL_CALLS):
        kernel, name, batch, q_seq, kv_seq = MODEL_CALLS[index]
    else:
        rng = random.Random(f"{seed}:{index}")
        kinds = ("forward", "decoding", "backward") if backward else ("forward", "decoding")
        kernel = rng.choice(kinds)
        name = rng.choice(HEAD_LAYOUTS)[0]
        while True:
            batch = rng.choice(BATCHES)
            kv_seq = rng.choice(LENGTHS)
            q_seq = 1 if kernel == "decoding" else kv_seq
            if batch * layout(name)[1] * q_seq * kv_seq <= max_elements or batch == 1:
                break
    _, heads, kv_heads, head_dim = layout(name)
    return {"kernel": kernel, "model": name, "batch": batch, "q_heads": heads, "kv_heads": kv_heads,
            "q_seq": q_seq, "kv_seq": kv_seq, "head_dim": head_dim}


def workload(spec: dict, device: str):
    """The ``autotune_families`` workload of one input."""
    from torchgen_ah.evaluation.studies.autotune_families import _flex

    family = {"forward": "flex_attention", "decoding": "flex_decoding",
              "backward": "flex_attention_backward"}[spec["kernel"]]
    mask = "none" if spec["kernel"] == "decoding" else "causal"
    return _flex(family, spec["model"], spec["batch"], spec["q_heads"], spec["kv_heads"], spec["kv_seq"],
                 spec["head_dim"], mask=mask, kv_seq=spec["kv_seq"], device=device)


class BenchmarkRunnerFlex(WorkloadRunner):
    name = "gen_data_flex"
    command = "python -m torchgen_ah.flex.gen_data_flex"
    description = "Generate FlexAttention AutoHeuristic data with the plugin's collector."
    collected = COLLECTED
    what = "FlexAttention's configs"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--backward", action="store_true", help="sample training steps (forward and backward) too")
        parser.add_argument("--max-elements", type=int, default=DEFAULT_MAX_ELEMENTS,
                            help="query-key pairs (batch x heads x lengths) a sampled call may have at most")

    def total_inputs(self, args) -> int:
        return len(MODEL_CALLS) + 48 if args.num_samples is None else args.num_samples

    def make_input(self, index: int, args) -> dict:
        return sample_call(args.seed, index, args.backward, args.max_elements)

    def describe_input(self, spec: dict) -> str:
        return (f"{spec['kernel']} {spec['model']} b{spec['batch']} q{spec['q_seq']} kv{spec['kv_seq']} "
                f"h{spec['q_heads']}/{spec['kv_heads']} d{spec['head_dim']}")

    def workload(self, spec: dict, device: str):
        return workload(spec, device)


def main(argv=None) -> int:
    return BenchmarkRunnerFlex().run(argv)


if __name__ == "__main__":
    sys.exit(main())
