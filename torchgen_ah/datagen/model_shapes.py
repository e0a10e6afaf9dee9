"""``python -m torchgen_ah.model_shapes``: collect the mm inputs of real models through the plugin's collector.

timm and transformers models are built from their configs with random weights (nothing is downloaded),
compiled with ``max-autotune-no-cudagraphs`` and run for one training step (forward + backward under bf16
autocast) or one inference step (bf16 weights, no_grad), over several batch sizes and sequence lengths.
Every mm Inductor autotunes lands in ``<prefix>_<suite>_<mode>_mm.txt`` (upstream's names:
``h200_timm_train_mm.txt``, ``h200_hf_train_mm.txt``; inference files end ``_infer_mm.txt``).

It is a ``BenchmarkRunner``: one input is one (suite, model, mode, batch, sequence) case, run in a warm
worker with a fresh Inductor cache, journaled, resumable, isolated from the others' failures, and stopped
at ``--max-minutes``. timm and transformers are imported only inside the worker (GPU machine).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from torchgen_ah.datagen.benchmark_runner import BenchmarkRunner
from torchgen_ah.datagen.fresh_caches import fresh_compile_caches

ENV_COLLECT = "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"
ENV_LOG_PATH = "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"
ENV_SEARCH_SPACE = "AH_PLUGIN_SEARCH_SPACE"
ENV_SEARCH_SAMPLE = "AH_PLUGIN_SEARCH_SAMPLE"

# Linear-heavy timm models (their mm inputs are what a heuristic meets in vision transformers and MLPs).
TIMM_MODELS = (
    "vit_base_patch16_224",
    "vit_large_patch16_224",
    "deit_small_patch16_224",
    "swin_tiny_patch4_window7_224",
    "mixer_b16_224",
    "convnext_tiny",
    "beit_base_patch16_224",
)
# transformers config classes with the sizes of well-known checkpoints; decoder stacks are cut to a few
# layers (every layer has the same mm shapes, so this changes nothing but compile time).
HF_MODELS = {
    "bert-base": ("BertConfig", "AutoModelForMaskedLM", {}),
    "gpt2": ("GPT2Config", "AutoModelForCausalLM", {"n_layer": 2}),
    "llama-7b-2l": ("LlamaConfig", "AutoModelForCausalLM", {
        "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
        "num_key_value_heads": 32, "num_hidden_layers": 2, "vocab_size": 32000}),
    "mistral-7b-2l": ("MistralConfig", "AutoModelForCausalLM", {
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 2, "vocab_size": 32000}),
}
TIMM_BATCHES = (8, 32, 64)
HF_BATCHES = (1, 4, 16)
HF_SEQ_LENS = (128, 512)
# mode "decode": the causal LMs producing one token for each of `batch` sequences (a forward pass of one
# position, bf16, no_grad). Its linear layers' GEMMs have M = batch: the small-M inputs of serving that
# training and prefill never give. Batch 1 is left out (M = 1 is a matrix-vector product, never autotuned).
DECODE_MODELS = ("gpt2", "llama-7b-2l", "mistral-7b-2l")
DECODE_BATCHES = (2, 4, 8, 16, 32, 64, 128)
MODES = ("train", "infer", "decode")


def all_cases(suites=("timm", "hf"), modes=("train", "infer")) -> list[dict]:
    """Every case, in a fixed order (case i is the same on every host). Decode cases come after all the
    others whatever the order of `modes`, so adding them moved no earlier case. ValueError for a mode
    other than MODES."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r}: expected some of {', '.join(MODES)}")
    cases = []
    for mode in (m for m in modes if m != "decode"):
        if "timm" in suites:
            for model in TIMM_MODELS:
                for batch in TIMM_BATCHES:
                    cases.append({"suite": "timm", "model": model, "mode": mode, "batch": batch, "seq": 0})
        if "hf" in suites:
            for model in HF_MODELS:
                for batch in HF_BATCHES:
                    for seq in HF_SEQ_LENS:
                        cases.append({"suite": "hf", "model": model, "mode": mode, "batch": batch, "seq": seq})
    if "decode" in modes and "hf" in suites:
        cases += [{"suite": "hf", "model": model, "mode": "decode", "batch": batch, "seq": 1}
                  for model in DECODE_MODELS for batch in DECODE_BATCHES]
    return cases


def describe_case(spec: dict) -> str:
    """A case in one line, e.g. ``hf gpt2 train batch=4 seq=512``."""
    seq = f" seq={spec['seq']}" if spec.get("seq") else ""
    return f"{spec['suite']} {spec['model']} {spec['mode']} batch={spec['batch']}{seq}"


def case_log_path(prefix: str, case: dict) -> str:
    return f"{prefix}_{case['suite']}_{case['mode']}_mm.txt"


class ModelShapesRunner(BenchmarkRunner):
    name = "model_shapes"
    command = "python -m torchgen_ah.model_shapes"
    description = "Collect mm autotuning data from timm/transformers models (random weights) on the GPU."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--suites", default="timm,hf", help="timm, hf or both")
        parser.add_argument("--modes", default="train,infer",
                            help="train, infer and/or decode (causal LMs, one token per sequence)")
        parser.add_argument("--search-space", choices=("wide", "default"), default="default",
                            help="plugin search space while collecting (default: default max-autotune's)")
        parser.add_argument("--search-space-sample", type=int, default=None,
                            help="with --search-space wide: extra configs timed per input (plugin default if unset)")
        parser.set_defaults(output="ah_models", timeout_per_sample=900.0, num_reps=1)

    def _cases(self, args) -> list[dict]:
        suites = tuple(s.strip() for s in args.suites.split(",") if s.strip())
        modes = tuple(s.strip() for s in args.modes.split(",") if s.strip())
        return all_cases(suites, modes)

    def total_inputs(self, args) -> int:
        available = max(0, len(self._cases(args)) - args.first_sample)
        return available if args.num_samples is None else min(args.num_samples, available)

    def make_input(self, index: int, args) -> dict:
        return self._cases(args)[index]

    def describe_input(self, spec: dict) -> str:
        return describe_case(spec)

    def worker_env(self, args, device: str) -> dict:
        env = {ENV_COLLECT: "mm", ENV_SEARCH_SPACE: args.search_space,
               ENV_LOG_PATH: os.path.abspath(case_log_path(args.output, self._cases(args)[0]))}
        if args.search_space_sample is not None:
            env[ENV_SEARCH_SAMPLE] = str(args.search_space_sample)
        return env

    def setup_worker(self, args, device: str) -> None:
        import torch  # lazy: only the worker imports torch (and the plugin's adapter), never the runner's parent

        from ah_plugin.inductor import compile_tools

        if device == "cpu" or not torch.cuda.is_available():
            raise RuntimeError("model_shapes needs a CUDA GPU")
        torch.cuda.set_device(0)
        torch.compiler.config.force_disable_caches = True
        compile_tools.set_options(autotune_local_cache=False)
        import ah_plugin

        ah_plugin.require_active_from_environment()  # the rows must come from our collector

    def run_sample(self, spec: dict, reps: int, args, device: str) -> dict:
        import torch  # lazy: only the worker imports torch, never the runner's parent

        os.environ[ENV_LOG_PATH] = os.path.abspath(case_log_path(args.output, spec))
        start = time.perf_counter()
        try:
            with fresh_compile_caches("ah_models_"):
                for _ in range(reps):
                    torch.compiler.reset()
                    model, inputs, loss_fn = build_case(torch, spec)
                    step(torch, model, inputs, loss_fn, spec["mode"])
                    del model, inputs
        finally:
            torch.compiler.reset()
            torch.cuda.empty_cache()
        return {"seconds": round(time.perf_counter() - start, 3)}

    def after_failure(self, exc, args, device) -> None:
        import torch  # lazy: only the worker imports torch, never the runner's parent

        torch.compiler.reset()
        torch.cuda.empty_cache()


def build_case(torch, spec: dict, device: str = "cuda"):
    """(model, inputs, loss function) on `device`; bf16 weights for inference, fp32 (autocast) for training.

    On "meta" (``torchgen_ah.model_gemms``: shapes only, no memory, no GPU) the model is built there
    directly, and training uses bf16 weights too, since autocast does not act on meta tensors: its
    GEMMs then have the dtype autocast would give them.
    """
    train = spec["mode"] == "train"
    batch = spec["batch"]
    built_on = torch.device("meta") if device == "meta" else contextlib.nullcontext()  # else: CPU, then moved
    if spec["suite"] == "timm":
        import timm  # optional: only its suite needs it (on the GPU machine)

        with built_on:
            model = timm.create_model(spec["model"], pretrained=False)
        size = model.pretrained_cfg.get("input_size", (3, 224, 224)) if hasattr(model, "pretrained_cfg") else (3, 224, 224)
        inputs = {"x": torch.randn(batch, *size, device=device)}

        def loss_fn(out):
            return out.float().square().mean()
    else:
        import transformers  # optional: only its suite needs it (on the GPU machine)

        config_name, auto_name, overrides = HF_MODELS[spec["model"]]
        config = getattr(transformers, config_name)(**overrides)
        with built_on:
            model = getattr(transformers, auto_name).from_config(config)
        vocab = config.vocab_size
        ids = torch.randint(0, vocab, (batch, spec["seq"]), device=device)
        inputs = {"input_ids": ids, "labels": ids} if train else {"input_ids": ids}

        def loss_fn(out):
            return out.loss if getattr(out, "loss", None) is not None else out.logits.float().mean()
    model = model.to(device)
    if train:
        model.train()
    if not train or device == "meta":
        model = model.to(torch.bfloat16)
        if not train:
            model = model.eval()
        if "x" in inputs:
            inputs["x"] = inputs["x"].to(torch.bfloat16)
    return model, inputs, loss_fn


def step(torch, model, inputs: dict, loss_fn, mode: str) -> None:
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    if mode == "train":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = compiled(**inputs)
            loss = loss_fn(out)
        loss.backward()
    else:
        with torch.no_grad():
            compiled(**inputs)
    torch.cuda.synchronize()


def main(argv=None) -> int:
    return ModelShapesRunner().run(argv)


if __name__ == "__main__":
    sys.exit(main())
