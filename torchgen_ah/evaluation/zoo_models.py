"""The model zoo's entries: what a user brings to ``torch.compile``, built offline with random weights.

Fast mode must be the right choice on every model, not only on the transformer inference it was tuned on,
so the zoo spans convolutions (channels-last, depthwise), vision transformers, encoders, decoders at
prefill and decode, a mixture of experts, an encoder-decoder, training steps and a decoder served at
changing batch sizes. Configurations are kept to a few layers: per-layer kernels repeat, and every
process of every mode must compile within seconds on the GPU machine. ``timm`` and ``transformers`` are
imported inside the builders (they exist on the GPU machine); the ``tiny_*`` entries are torch-only, for
the CPU tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torchgen_ah.evaluation import zoo_decoders

INFER, TRAIN, SERVING = "infer", "train", "serving"


@dataclass(frozen=True)
class Entry:
    """One zoo model. ``build(torch)`` returns (module, make_inputs(batch) -> tuple of positional inputs);
    float inputs are made in float32 and cast to the run's dtype."""

    name: str
    family: str  # cnn, vit, encoder, decoder, moe, encoder_decoder, mlp
    about: str
    build: Callable
    batch: int
    kind: str = INFER
    phase: str = ""  # prefill or decode, where a decoder's step is one of them
    channels_last: bool = False
    batches: tuple[int, ...] = ()  # serving: the batch sizes one compiled model is called at, in turn
    in_zoo: bool = True  # False: known (the step profile, tests) but not in the zoo's default list


class _FirstTensor:
    """A module calling ``inner`` with its positional inputs as the keywords ``names`` (or positionally)
    and returning the first tensor of the output (a ``ModelOutput``'s first field): what a step consumes."""

    @staticmethod
    def wrap(torch, inner, names: tuple[str, ...] = ()):
        class FirstTensor(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                out = self.inner(**dict(zip(names, args))) if names else self.inner(*args)
                return out if isinstance(out, torch.Tensor) else out[0]

        return FirstTensor()


def _images(torch, size: int = 224):
    return lambda batch: (torch.randn(batch, 3, size, size),)


def _tokens(torch, vocab: int, length: int):
    return lambda batch: (torch.randint(0, vocab, (batch, length)),)


def _timm(name: str, size: int = 224, **kwargs):
    def build(torch):
        import timm  # optional: on the GPU machine

        return timm.create_model(name, pretrained=False, **kwargs), _images(torch, size)

    return build


def _llama_config(transformers):
    return transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=2,
                                    num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                                    max_position_embeddings=2048, use_cache=False)


def _qwen2_config(transformers):
    # the shape of a small Qwen2 (bias on the QKV projections, grouped-query attention, 150k vocabulary)
    return transformers.Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=4,
                                    num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                    max_position_embeddings=2048, tie_word_embeddings=True, use_cache=False)


def _causal_lm(config_of, model_class: str, tokens: int):
    def build(torch):
        import transformers  # optional: on the GPU machine

        config = config_of(transformers)
        return getattr(transformers, model_class)(config), _tokens(torch, config.vocab_size, tokens)

    return build


def _gpt2(tokens: int):
    def build(torch):
        import transformers

        config = transformers.GPT2Config(n_layer=4, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
                                         use_cache=False)
        return transformers.GPT2Model(config), _tokens(torch, config.vocab_size, tokens)

    return build


def _bert(torch):
    import transformers

    config = transformers.BertConfig(num_hidden_layers=4, hidden_size=768, num_attention_heads=12,
                                     intermediate_size=3072, vocab_size=30522)
    return transformers.BertModel(config, add_pooling_layer=False), _tokens(torch, config.vocab_size, 128)


def _mixtral(torch):
    import transformers

    config = transformers.MixtralConfig(hidden_size=1024, intermediate_size=3584, num_hidden_layers=2,
                                        num_attention_heads=16, num_key_value_heads=8, num_local_experts=8,
                                        num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=2048,
                                        use_cache=False)
    return transformers.MixtralModel(config), _tokens(torch, config.vocab_size, 128)


def _t5(torch):
    import transformers

    config = transformers.T5Config(d_model=512, d_kv=64, d_ff=2048, num_layers=2, num_decoder_layers=2,
                                   num_heads=8, vocab_size=32128, use_cache=False)
    model = _FirstTensor.wrap(torch, transformers.T5Model(config), ("input_ids", "decoder_input_ids"))
    return model, lambda batch: (torch.randint(0, config.vocab_size, (batch, 128)),
                                 torch.randint(0, config.vocab_size, (batch, 32)))


def _tiny_mlp(torch):
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 96),
                                torch.nn.GELU(), torch.nn.Linear(96, 32))
    return model, lambda batch: (torch.randn(batch, 64),)


def _tiny_decoder(torch, vocab: int = 128, dim: int = 64, tokens: int = 1):
    """A torch-only pre-norm decoder block (RMS norm, causal attention, gated MLP) with an LM head."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.norm1, self.norm2, self.norm3 = (nn.RMSNorm(dim) for _ in range(3))
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim, bias=False)
            self.gate_up, self.down = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(2 * dim, dim, bias=False)
            self.head = nn.Linear(dim, vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            q, k, v = self.qkv(self.norm1(x)).unflatten(-1, (3, 4, dim // 4)).permute(2, 0, 3, 1, 4)
            attn = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attn.transpose(1, 2).flatten(2))
            gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
            x = x + self.down(nn.functional.silu(gate) * up)
            return self.head(self.norm3(x))

    return Block(), _tokens(torch, vocab, tokens)


def _kv_decode_entries() -> list[Entry]:
    """Decoding with a static KV cache at batch 1, 8, 32 and contexts 512, 2048, FlexAttention or SDPA."""
    return [Entry(f"kv_decode_{attention}_b{batch}_c{context}", "decoder",
                  f"gpt-fast-style Llama, 2 layers, hidden 2048, GQA 32/8 heads, {attention} attention, static KV "
                  f"cache of {context} positions, one token per sequence at position {context // 2}",
                  zoo_decoders.kv_decode(attention, batch, context), batch, phase="decode")
            for attention in ("flex", "sdpa") for batch in (1, 8, 32) for context in (512, 2048)]


_LLAMA_DECODE = _causal_lm(_llama_config, "LlamaForCausalLM", 1)
_TINY = zoo_decoders.TINY
ENTRIES: dict[str, Entry] = {e.name: e for e in (
    Entry("resnet50_cl", "cnn", "timm resnet50, channels-last (1x1 convolutions)", _timm("resnet50"), 32,
          channels_last=True),
    Entry("mobilenetv3_cl", "cnn", "timm mobilenetv3_large_100 at depth multiplier 0.5, channels-last (depthwise "
          "convolutions, squeeze-excite)", _timm("mobilenetv3_large_100", depth_multiplier=0.5), 32,
          channels_last=True),
    Entry("convnext_cl", "cnn", "timm convnext_tiny with depths 1,1,3,1, channels-last (7x7 depthwise, linear MLPs)",
          _timm("convnext_tiny", depths=(1, 1, 3, 1)), 32, channels_last=True),
    Entry("vit_small", "vit", "timm vit_small_patch16_224 with 6 blocks", _timm("vit_small_patch16_224", depth=6), 32),
    Entry("swin_tiny", "vit", "timm swin_tiny_patch4_window7_224 with depths 2,2,2,2 (window attention)",
          _timm("swin_tiny_patch4_window7_224", depths=(2, 2, 2, 2)), 32),
    Entry("bert", "encoder", "transformers BertModel, 4 layers, hidden 768, 128 tokens", _bert, 16),
    Entry("gpt2", "decoder", "transformers GPT2Model, 4 layers, hidden 768, 256 tokens", _gpt2(256), 8,
          phase="prefill"),
    Entry("gpt2_decode", "decoder", "the GPT-2 above at decode (one token)", _gpt2(1), 32, phase="decode",
          in_zoo=False),
    Entry("llama_prefill", "decoder", "transformers LlamaForCausalLM, 2 layers, hidden 2048, 256 tokens",
          _causal_lm(_llama_config, "LlamaForCausalLM", 256), 8, phase="prefill"),
    Entry("llama_decode", "decoder", "the Llama above at decode (one token, no KV cache)", _LLAMA_DECODE, 64,
          phase="decode"),
    Entry("qwen2_prefill", "decoder", "transformers Qwen2ForCausalLM, 4 layers, hidden 896, QKV bias, 152k vocabulary, "
          "256 tokens", _causal_lm(_qwen2_config, "Qwen2ForCausalLM", 256), 8, phase="prefill"),
    Entry("qwen2_decode", "decoder", "the Qwen2 above at decode (one token, no KV cache)",
          _causal_lm(_qwen2_config, "Qwen2ForCausalLM", 1), 32, phase="decode"),
    Entry("mixtral_moe", "moe", "transformers MixtralModel, 2 layers, 8 experts (top 2), hidden 1024, 128 tokens",
          _mixtral, 8, phase="prefill"),
    Entry("t5", "encoder_decoder", "transformers T5Model, 2+2 layers, d_model 512, 128 and 32 tokens", _t5, 8),
    Entry("resnet50_cl_train", "cnn", "training step: timm resnet50 with one block per stage, channels-last",
          _timm("resnet50", layers=(1, 1, 1, 1)), 16, kind=TRAIN, channels_last=True),
    Entry("vit_small_train", "vit", "training step: timm vit_small_patch16_224 with 4 blocks",
          _timm("vit_small_patch16_224", depth=4), 32, kind=TRAIN),
    Entry("llama_train", "decoder", "training step: the Llama above, 256 tokens",
          _causal_lm(_llama_config, "LlamaForCausalLM", 256), 4, kind=TRAIN, phase="prefill"),
    Entry("llama_serving", "decoder", "the Llama above at decode, one compiled model called at 8 batch sizes in turn",
          _LLAMA_DECODE, 8, kind=SERVING, phase="decode", batches=(8, 16, 32, 64, 1, 2, 4, 48)),
    *_kv_decode_entries(),
    Entry("flex_prefill_sliding", "decoder", "the gpt-fast-style Llama at prefill, FlexAttention with a 512-token "
          "sliding window (Mistral-style), 2048 tokens", zoo_decoders.prefill(4, 2048, flex_mask="sliding", window=512),
          4, phase="prefill"),
    Entry("flex_prefill_document", "decoder", "the gpt-fast-style Llama at prefill, FlexAttention over four packed "
          "documents (causal within each), 8192 tokens", zoo_decoders.prefill(1, 8192, flex_mask="document"), 1,
          phase="prefill"),
    Entry("fp8_decode", "decoder", "the gpt-fast-style Llama with fp8 projections (torch._scaled_mm, row-wise scales), "
          "SDPA, static KV cache of 2048 positions, one token per sequence",
          zoo_decoders.kv_decode("sdpa", 16, 2048, fp8=True), 16, phase="decode"),
    Entry("fp8_prefill", "decoder", "the fp8 Llama above at prefill, causal SDPA, 512 tokens",
          zoo_decoders.prefill(4, 512, fp8=True), 4, phase="prefill"),
    Entry("tiny_mlp", "mlp", "torch only: three linear layers", _tiny_mlp, 24, in_zoo=False),
    Entry("tiny_decoder", "decoder", "torch only: one decoder block at decode", _tiny_decoder, 8, phase="decode",
          in_zoo=False),
    Entry("tiny_serving", "mlp", "torch only: the three linear layers called at 4 batch sizes in turn", _tiny_mlp, 4,
          kind=SERVING, batches=(4, 1, 2, 8), in_zoo=False),
    Entry("tiny_kv_decode_sdpa", "decoder", "torch only: the kv_decode entries' decoder, tiny, SDPA",
          zoo_decoders.kv_decode("sdpa", 2, 64, _TINY), 2, phase="decode", in_zoo=False),
    Entry("tiny_kv_decode_flex", "decoder", "torch only: the kv_decode entries' decoder, tiny, FlexAttention",
          zoo_decoders.kv_decode("flex", 2, 64, _TINY), 2, phase="decode", in_zoo=False),
    Entry("tiny_flex_prefill", "decoder", "torch only: flex_prefill_sliding, tiny (a 16-token window)",
          zoo_decoders.prefill(2, 64, _TINY, flex_mask="sliding", window=16), 2, phase="prefill", in_zoo=False),
    Entry("tiny_fp8_decode", "decoder", "torch only: fp8_decode, tiny", zoo_decoders.kv_decode("sdpa", 2, 64, _TINY,
                                                                                            fp8=True), 2,
          phase="decode", in_zoo=False),
)}
ZOO = tuple(name for name, e in ENTRIES.items() if e.in_zoo)


@dataclass
class Built:
    """An entry made ready to run: the module (on the device, in the run's dtype and mode) and its inputs."""

    entry: Entry
    model: object
    make_inputs: Callable  # batch -> tuple of inputs on the device

    @property
    def train(self) -> bool:
        return self.entry.kind == TRAIN


def build(torch, name: str, device: str) -> Built:
    """Entry ``name`` on ``device`` (bfloat16 on CUDA, float32 on the CPU), weights created there.
    Raises whatever the model's library raises when it cannot be built (reported as a skipped model)."""
    entry = ENTRIES[name]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        module, raw_inputs = entry.build(torch)
        model = _FirstTensor.wrap(torch, module).to(device=device, dtype=dtype)
    memory_format = torch.channels_last if entry.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)

    def make_inputs(batch: int) -> tuple:
        with torch.device(device):
            inputs = raw_inputs(batch)
        return tuple(x.to(dtype=dtype, memory_format=memory_format) if x.is_floating_point() else x
                     for x in inputs)

    return Built(entry, model.train() if entry.kind == TRAIN else model.eval(), make_inputs)
