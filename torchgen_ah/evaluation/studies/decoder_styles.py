"""The decoders the KV-cache studies build (``kv_decode.build_model``), each at the width of a model users serve,
and the bytes a decoding step cannot avoid reading (its roofline).

Every style keeps the named model's layer width, heads, key/value heads, MLP width and vocabulary, at a few
layers (the study's ``--layers``), random bf16 weights:

* ``llama``: gpt-fast's default, the width of TinyLlama-1.1B (hidden 2048, 32 query and 8 key/value heads);
* ``qwen2``: Qwen2-1.5B (hidden 1536, 12 and 2 heads, biases on the query/key/value projections, a 151936-token
  vocabulary whose embedding the output head shares);
* ``mistral``: Mistral-7B (hidden 4096, 32 and 8 heads, MLP 14336; its 4096-token sliding window is wider than
  every context measured, so attention is causal over the whole cache);
* ``moe``: Mixtral's routing (8 SwiGLU experts, 2 per token) at the llama style's width. The experts run in
  the form that compiles to one static graph: every expert on every token, its output weighted by the
  routing (zero where the token was not routed), so a step reads every expert's weights.

The roofline counts what any implementation must read per decoding step: the weights (the embedding table
only where the output head shares it; a mixture's experts only as many as ``batch`` tokens route to, in
expectation under uniform routing) and the keys and values of the cache up to the decoded position.
"""

from __future__ import annotations

STYLES = {
    "llama": {"dim": 2048, "heads": 32, "kv_heads": 8, "hidden": 5632, "vocab": 32000},
    "qwen2": {"dim": 1536, "heads": 12, "kv_heads": 2, "hidden": 8960, "vocab": 151936, "qkv_bias": True,
              "tie": True},
    "mistral": {"dim": 4096, "heads": 32, "kv_heads": 8, "hidden": 14336, "vocab": 32000},
    "moe": {"dim": 2048, "heads": 32, "kv_heads": 8, "hidden": 5632, "vocab": 32000, "experts": 8, "top_k": 2},
}

#: HBM bandwidth in TB/s by a word of the GPU's name (the vendors' figures for the SXM parts)
HBM_TBS = {"H200": 4.8, "H100": 3.35, "A100": 2.0}


def style(name: str, **overrides) -> dict:
    """The size keywords of ``kv_decode.build_model`` for style ``name``, with ``overrides`` (None ignored)."""
    if name not in STYLES:
        raise ValueError(f"unknown decoder style {name!r}; known: {', '.join(STYLES)}")
    size = dict(STYLES[name])
    size.update({k: v for k, v in overrides.items() if v is not None})
    return size


def hbm_tbs(device_name: str) -> float | None:
    """The HBM bandwidth of the GPU named ``device_name``, None where this table does not know it."""
    for word, tbs in HBM_TBS.items():
        if word in device_name:
            return tbs
    return None


def expected_experts(experts: int, top_k: int, tokens: int) -> float:
    """Experts that ``tokens`` tokens route to, in expectation, each picking ``top_k`` of ``experts`` uniformly."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def step_bytes(model, size: dict, *, layers: int, batch: int, position: int) -> tuple[int, int]:
    """(weight bytes, KV-cache bytes) a decoding step of ``batch`` tokens at ``position`` must read."""
    weights = 0
    seen = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        nbytes = p.numel() * p.element_size()
        if name == "embed.weight" and not size.get("tie"):
            nbytes = batch * p.shape[1] * p.element_size()  # only the rows of the step's tokens
        elif size.get("experts") and name.rsplit(".", 1)[-1] in ("w1", "w2", "w3"):
            nbytes = int(nbytes * expected_experts(size["experts"], size.get("top_k", 2), batch) / size["experts"])
        weights += nbytes
    head_dim = size["dim"] // size["heads"]
    kv = 2 * layers * batch * size["kv_heads"] * (position + 1) * head_dim * 2  # keys and values, bf16
    return weights, kv
