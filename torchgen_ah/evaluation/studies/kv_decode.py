"""Decoding as users decode: a Llama-style decoder with a static KV cache, its modes compiled and timed in one
process.

    python -m torchgen_ah.evaluation.studies.kv_decode [--attention flex|sdpa] [--batch 8] [--context 4096]
        [--prompt 512] [--layers 4] [--style llama|qwen2|mistral|moe] [--dim 2048]
        [--modes off,off_frozen,fast,quality,default_flex,default]
        [--rounds 7] [--budget-s 400] [--json OUT.json] [--results benchmarks/RESULTS.md]
    python -m torchgen_ah.evaluation.studies.kv_decode --combine A.json B.json [--results benchmarks/RESULTS.md]

The model is built in the way of gpt-fast: embeddings, ``--layers`` blocks of RMSNorm, grouped-query attention
over a static cache of ``--context`` positions per layer, SwiGLU MLP (or a mixture of experts), and an output
head, at the widths of ``--style`` (``decoder_styles.py``; llama: 32 query and 8 key/value heads); random
weights in bf16. Two functions are compiled per mode: *prefill* (``--prompt`` tokens of
each of ``--batch`` sequences, causal attention, the cache written) and *decode* (one token per sequence
against the whole cache, the positions not yet written masked out, as a static cache does).
``--attention flex`` runs attention through FlexAttention (its decoding kernel at decode), ``sdpa`` through
``scaled_dot_product_attention``.

Modes, each a separate compile in this process (the plugin switched on around its own):

* ``off``: ``torch.compile`` without max-autotune;
* ``fast``/``quality``: ``mode="max-autotune-no-cudagraphs"`` with the plugin's use mode on the GEMMs and
  FlexAttention's kernels (``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm,flex_attention,flex_decoding``);
* ``default_flex``: max-autotune for FlexAttention only (``max_autotune`` on, GEMM autotuning off), plugin off;
* ``default``: default max-autotune, plugin off (compiled last: it takes longest).

Every function is timed by CUDA-graph replay (as a model decoding under CUDA graphs runs) in interleaved rounds,
the modes' order rotating; the table gives per mode the decode step (ms per output token of the batch),
tokens per second, the prefill (time to first token), both against off, the compile's first-call seconds
(in this shared process, not a fresh one) and the share of the weight-streaming roofline: bytes of weights
and of the KV cache the step must read, over the HBM bandwidth (``--hbm-tbs``; by default from the GPU's
name, 4.8 TB/s for an H200, 3.35 for an H100). ``off_frozen`` is off with Inductor's freezing. A mode
whose compile would pass ``--budget-s`` (counted from the start) is left out, named.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import statistics
import sys
import time

from torchgen_ah.evaluation.studies import decoder_styles

SECTION = "kv_decode"
MODES = ("off", "off_frozen", "fast", "quality", "default_flex", "default")
USE_OPS = ["mm", "flex_attention", "flex_decoding"]


def build_model(torch, *, layers: int, dim: int, heads: int, kv_heads: int, vocab: int, batch: int,
                context: int, attention: str, device: str = "cuda", dtype=None, hidden: int | None = None,
                qkv_bias: bool = False, tie: bool = False, experts: int = 0, top_k: int = 2):
    """The decoder (an ``nn.Module`` with ``prefill(tokens)`` and ``decode(tokens, pos)``) on ``device``.

    ``hidden``: the MLP's width (None: gpt-fast's rule from ``dim``); ``qkv_bias``: biases on the query, key and
    value projections (Qwen2); ``tie``: the output head shares the embedding's weight; ``experts`` > 0: a
    mixture of that many SwiGLU experts, ``top_k`` routed per token (``decoder_styles`` says how it runs)."""
    import torch.nn.functional as F
    from torch import nn

    dtype = dtype or torch.bfloat16
    head_dim = dim // heads
    hidden = hidden or int(2 * (4 * dim) / 3 + 255) // 256 * 256
    flex = attention == "flex"
    if flex:
        from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * self.weight

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()
            self.wq = nn.Linear(dim, heads * head_dim, bias=qkv_bias)
            self.wk = nn.Linear(dim, kv_heads * head_dim, bias=qkv_bias)
            self.wv = nn.Linear(dim, kv_heads * head_dim, bias=qkv_bias)
            self.wo = nn.Linear(heads * head_dim, dim, bias=False)
            if experts:
                self.router = nn.Linear(dim, experts, bias=False)
                self.w1 = nn.Parameter(torch.empty(experts, hidden, dim))
                self.w3 = nn.Parameter(torch.empty(experts, hidden, dim))
                self.w2 = nn.Parameter(torch.empty(experts, dim, hidden))
            else:
                self.w1 = nn.Linear(dim, hidden, bias=False)
                self.w3 = nn.Linear(dim, hidden, bias=False)
                self.w2 = nn.Linear(hidden, dim, bias=False)
            self.register_buffer("k_cache", torch.zeros(batch, kv_heads, context, head_dim, dtype=dtype))
            self.register_buffer("v_cache", torch.zeros(batch, kv_heads, context, head_dim, dtype=dtype))

        def attend(self, x, positions, mask):
            b, s, _ = x.shape
            q = self.wq(x).view(b, s, heads, head_dim).transpose(1, 2)
            k = self.wk(x).view(b, s, kv_heads, head_dim).transpose(1, 2)
            v = self.wv(x).view(b, s, kv_heads, head_dim).transpose(1, 2)
            self.k_cache.index_copy_(2, positions, k)
            self.v_cache.index_copy_(2, positions, v)
            if s > 1:  # prefill: the prompt attends to itself, causally
                keys, values = k, v
            else:  # decode: the token attends to the whole static cache, unwritten positions masked
                keys, values = self.k_cache, self.v_cache
            if flex:
                out = flex_attention(q, keys, values, block_mask=mask, enable_gqa=True)
            else:
                out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True,
                                                     is_causal=mask is None)
            return self.wo(out.transpose(1, 2).reshape(b, s, heads * head_dim))

        def mixture(self, y):
            """Every expert on every token, its output weighted by the routing (zero where not routed)."""
            probs = self.router(y).float().softmax(-1)
            weights, chosen = torch.topk(probs, top_k, dim=-1)
            gate = torch.zeros_like(probs).scatter(-1, chosen, weights / weights.sum(-1, keepdim=True))
            gate = gate.to(y.dtype)
            out = torch.zeros_like(y)
            for e in range(experts):
                h = F.silu(y @ self.w1[e].t()) * (y @ self.w3[e].t())
                out = out + gate[..., e:e + 1] * (h @ self.w2[e].t())
            return out

        def forward(self, x, positions, mask):
            h = x + self.attend(self.attention_norm(x), positions, mask)
            y = self.ffn_norm(h)
            if experts:
                return h + self.mixture(y)
            return h + self.w2(F.silu(self.w1(y)) * self.w3(y))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = RMSNorm()
            self.output = nn.Linear(dim, vocab, bias=False)
            if tie:
                self.output.weight = self.embed.weight
            self.register_buffer("position", torch.zeros(1, dtype=torch.long))

        def run(self, tokens, positions, mask):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x, positions, mask)
            return self.output(self.norm(x[:, -1:]))

        def prefill(self, tokens, positions, mask):
            return self.run(tokens, positions, mask)

        def decode(self, tokens, positions, mask):
            return self.run(tokens, positions, mask)

    model = Decoder().to(device=device, dtype=dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)

    def prefill_mask(prompt: int):
        if not flex:
            return None
        return create_block_mask(lambda b, h, q, kv: q >= kv, None, None, prompt, prompt, device=device)

    def decode_mask():
        """Every key block partial (so the mask function runs per position): keys past the model's current
        ``position`` are masked out."""
        if flex:
            block = 128
            blocks = math.ceil(context / block)
            position = model.position

            def mask_mod(b, h, q, kv):
                return kv <= position[0]

            num = torch.full((1, 1, 1), blocks, dtype=torch.int32, device=device)
            indices = torch.arange(blocks, dtype=torch.int32, device=device).view(1, 1, 1, blocks)
            return BlockMask.from_kv_blocks(num, indices, BLOCK_SIZE=block, mask_mod=mask_mod,
                                            seq_lengths=(1, context))
        return None

    return model, prefill_mask, decode_mask


def sdpa_decode_mask(torch, context: int, position, device: str = "cuda"):
    """SDPA's boolean mask for one token at ``position`` over the whole cache."""
    return (torch.arange(context, device=device) <= position).view(1, 1, 1, context)


def roofline_ms(param_bytes: int, kv_bytes: int, hbm_tbs: float) -> float:
    """The time to read the weights and the KV cache once at the HBM bandwidth (the decode step's floor)."""
    return (param_bytes + kv_bytes) / (hbm_tbs * 1e12) * 1e3


def _compile_args(mode: str) -> dict:
    """``torch.compile``'s arguments for ``mode``; each mode's options differ, so Dynamo compiles each afresh."""
    from ah_plugin.inductor import compile_tools

    if mode == "off":
        return {"dynamic": False}
    if mode == "off_frozen":  # what a user who serves frozen weights gets without max-autotune
        return {"options": {"freezing": True}, "dynamic": False}
    if mode == "fast":
        return {"mode": "max-autotune-no-cudagraphs", "dynamic": False}
    if mode == "quality":
        options = dict(compile_tools.mode_options("max-autotune-no-cudagraphs"))
        options.update(compile_tools.option_values("trace.enabled"))
        return {"options": options, "dynamic": False}
    if mode == "default_flex":
        return {"options": {"max_autotune": True, "max_autotune_gemm": False, "triton.cudagraphs": False},
                "dynamic": False}
    options = {"max_autotune": True, "triton.cudagraphs": False}
    options.update(compile_tools.option_values("verbose_progress"))
    return {"options": options, "dynamic": False}


def _scope(ah_plugin, mode: str):
    import contextlib

    if mode in ("fast", "quality"):
        return ah_plugin.enabled(use=USE_OPS, top_k=mode)
    return contextlib.nullcontext()


class CompileDeadline(Exception):
    """A mode's compile ran past the study's budget."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise ``CompileDeadline`` in this (main) thread once ``seconds`` have passed inside the block."""
    def expire(signum, frame):
        raise CompileDeadline(f"compile ran past the budget ({seconds:.0f} s left when it started)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1.0))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(args, time_ms=None) -> dict:
    """Compile and time every mode of one (style, batch, context); ``time_ms(fn)`` times one call (CUDA-graph
    replay by default). ``args`` holds the CLI's fields (``batch`` and ``context`` single numbers here)."""
    import torch

    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from ah_plugin.inductor.generated_code_capture import capturing_code
    from torchgen_ah.evaluation.generated_code import code_fingerprint, code_summary

    time_ms = time_ms or compile_tools.replay_time_ms
    device = args.device
    compile_tools.without_compile_caches()
    started = time.perf_counter()
    budget_s = args.budget_s - getattr(args, "spent_s", 0.0)
    overrides = {"dim": args.dim, "vocab": args.vocab} | getattr(args, "overrides", {})  # the tests' tiny sizes
    size = decoder_styles.style(getattr(args, "style", "llama"), **overrides)
    vocab = size["vocab"]
    model, prefill_mask, decode_mask = build_model(
        torch, layers=args.layers, **size, batch=args.batch, context=args.context, attention=args.attention,
        device=device)
    prompt_len = args.prompt or min(512, args.context // 2)
    gen = torch.Generator(device=device).manual_seed(0)
    prompt = torch.randint(0, vocab, (args.batch, prompt_len), device=device, generator=gen)
    prompt_positions = torch.arange(prompt_len, device=device)
    token = torch.randint(0, vocab, (args.batch, 1), device=device, generator=gen)
    position = args.context // 2  # the decode step is timed half way through the cache
    model.position.fill_(position)
    decode_positions = torch.tensor([position], device=device)
    p_mask = prefill_mask(prompt_len)
    d_mask = decode_mask() if args.attention == "flex" else sdpa_decode_mask(torch, args.context, position, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    results, compiled = {}, {}
    reference = None
    for mode in args.modes:
        left = budget_s - (time.perf_counter() - started)
        if left <= 0:
            results[mode] = {"skipped": f"budget of {args.budget_s:.0f} s reached before it"}
            print(f"kv_decode: {mode} left out (budget)", flush=True)
            continue
        before = _flex_stats()
        graphs_before = compile_tools.dynamo_graph_count()
        fns, seconds = {}, {}
        failed = None
        try:
            with deadline(left), _scope(ah_plugin, mode), torch.no_grad(), capturing_code() as codes:
                for name, fn, call in (("decode", model.decode, (token, decode_positions, d_mask)),
                                       ("prefill", model.prefill, (prompt, prompt_positions, p_mask))):
                    compiled_fn = torch.compile(fn, **_compile_args(mode))
                    start = time.perf_counter()
                    out = compiled_fn(*call)
                    sync()
                    seconds[name] = time.perf_counter() - start
                    fns[name] = (compiled_fn, call, out)
        except Exception as exc:  # noqa: BLE001 - a mode that cannot compile in time is named, not fatal
            failed = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(f"kv_decode: {mode}: {failed}", flush=True)
        if "decode" not in fns:
            results[mode] = {"skipped": failed or "not compiled", "compile_s": seconds}
            continue
        decode_out = fns["decode"][2].float()
        if reference is None:
            reference = decode_out
        results[mode] = {"compile_s": seconds, "max_diff": (decode_out - reference).abs().max().item(),
                         "prefill_failed": failed, "code": code_fingerprint(codes),
                         "templates": code_summary(codes)["templates"],
                         "graphs": compile_tools.dynamo_graph_count() - graphs_before,
                         "flex_decisions": {k: v - before.get(k, 0) for k, v in _flex_stats().items()}}
        compiled[mode] = fns
        print(f"kv_decode: {mode} compiled in " + " + ".join(f"{k} {v:.1f} s" for k, v in seconds.items()), flush=True)

    times = {mode: {name: [] for name in compiled[mode]} for mode in compiled}
    names = list(compiled)
    with torch.no_grad():
        for r in range(args.rounds):
            for mode in names[r % len(names):] + names[: r % len(names)]:
                for name in compiled[mode]:
                    fn, call, _ = compiled[mode][name]
                    times[mode][name].append(time_ms(lambda fn=fn, call=call: fn(*call)))
    device_name = torch.cuda.get_device_name() if device == "cuda" else device
    tbs = args.hbm_tbs or decoder_styles.hbm_tbs(device_name)
    weights, kv_valid = decoder_styles.step_bytes(model, size, layers=args.layers, batch=args.batch,
                                                  position=position)
    floor = roofline_ms(weights, kv_valid, tbs) if tbs else None
    for mode in compiled:
        for name, values in times[mode].items():
            results[mode][f"{name}_ms"] = statistics.median(values)
            results[mode][f"{name}_spread"] = max(values) / min(values) - 1
        results[mode]["tokens_per_s"] = args.batch / results[mode]["decode_ms"] * 1e3
        results[mode]["roofline_share"] = floor / results[mode]["decode_ms"] if floor else None
    config = {k: v for k, v in vars(args).items() if k not in ("spent_s", "overrides")}
    return {"config": config | {"modes": list(args.modes), "prompt": prompt_len, "hbm_tbs": tbs, "size": size},
            "param_bytes": weights, "kv_bytes_valid": kv_valid, "roofline_ms": floor, "torch": torch.__version__,
            "device": device_name, "results": results}


def _flex_stats() -> dict:
    from ah_plugin.inductor import flex_choices

    return dict(flex_choices.stats)


def report(runs: list[dict], command: str) -> str:
    """The ``kv_decode`` section: one row per run (attention kind) and mode."""
    first = runs[0]
    config = first["config"]
    lines = [
        "## Decoding with a KV cache",
        "",
        f"Command: `{command}` on {first['device']} (torch {first['torch']}).",
        "",
        f"A {config['layers']}-layer Llama-style decoder (hidden {config.get('size', config)['dim']}, 32 query and "
        f"8 key/value heads, vocabulary {config.get('size', config)['vocab']}), batch {config['batch']}, a static cache of {config['context']} positions, "
        f"decode timed at position {config['context'] // 2}, prompt {config['prompt']} tokens (time to first token: "
        "the prefill). A run's modes are compiled in one process and timed by CUDA-graph replay in "
        f"{config['rounds']} interleaved rounds (median; spread = max/min - 1). Roofline share: the weights and the "
        f"valid KV cache read once at {config['hbm_tbs']} TB/s ({first['roofline_ms'] or 0:.3f} ms) over the step. Compile: "
        "first calls in that shared process, prefill + decode.",
        "",
        "| attention | mode | decode ms/token | tokens/s | decode x off (spread) | roofline share | "
        "prefill ms | prefill x off | compile s | max diff |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        attention, results = run["config"]["attention"], run["results"]
        off = results.get("off", {})
        for mode, r in results.items():
            if "decode_ms" not in r:
                lines.append(f"| {attention} | {mode} | {r.get('skipped', 'not measured')[:90]} | | | | | | | |")
                continue
            c = r["compile_s"]
            prefill = (f"{r['prefill_ms']:.2f} | {r['prefill_ms'] / off['prefill_ms']:.3f}" if "prefill_ms" in r
                       else "not compiled in the budget | -")
            compile_s = " + ".join(f"{c[k]:.1f}" for k in ("prefill", "decode") if k in c)
            lines.append(
                f"| {attention} | {mode} | {r['decode_ms']:.3f} | {r['tokens_per_s']:.0f} | "
                f"{r['decode_ms'] / off['decode_ms']:.3f} ({r['decode_spread']:.0%}) | {_share(r)} | "
                f"{prefill} | {compile_s} | {r['max_diff']:.0e} |")
    return "\n".join(lines)


def _share(result: dict) -> str:
    share = result.get("roofline_share")
    return "-" if share is None else f"{share:.0%}"


def main(argv=None) -> int:
    from ah_plugin.report import command_line

    parser = command_line.parser("python -m torchgen_ah.evaluation.studies.kv_decode", __doc__.splitlines()[0])
    parser.add_argument("--attention", choices=("flex", "sdpa"), default="flex")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=4096, help="static cache positions per layer")
    parser.add_argument("--prompt", type=int, default=None,
                        help="prompt tokens per sequence (default: 512, at most half the cache)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--style", choices=tuple(decoder_styles.STYLES), default="llama",
                        help="the decoder's widths (studies/decoder_styles.py)")
    parser.add_argument("--dim", type=int, default=None, help="override the style's hidden size")
    parser.add_argument("--vocab", type=int, default=None, help="override the style's vocabulary")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=400.0,
                        help="no mode starts compiling after this many seconds")
    parser.add_argument("--hbm-tbs", type=float, default=None,
                        help="HBM bandwidth in TB/s (default: from the GPU's name, e.g. 4.8 for an H200)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--results", help="write the table as a section of this markdown file")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="report on these runs' --json files together (no GPU needed)")
    args = parser.parse_args(argv)
    command = "python -m torchgen_ah.evaluation.studies.kv_decode " + " ".join(argv if argv is not None else sys.argv[1:])
    from torchgen_ah.evaluation.results_section import publish_report

    if args.combine:
        import json

        runs = []
        for path in args.combine:
            try:
                with open(path, encoding="utf-8") as handle:
                    runs.append(json.load(handle))
            except (OSError, ValueError) as exc:
                return command_line.fail("kv_decode", ValueError(f"{path}: {exc}"))
        return publish_report(report(runs, command), {"runs": runs}, SECTION, None, args.results)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes {', '.join(unknown)}; known: {', '.join(MODES)}")
    if args.modes[0] != "off":
        parser.error("the first mode must be off (the others are judged against it)")
    import torch

    if not torch.cuda.is_available():
        return command_line.fail("kv_decode", RuntimeError("needs a CUDA GPU (times by CUDA-graph replay)"))
    figures = run(args)
    return publish_report(report([figures], command), figures, SECTION, args.json, args.results)


if __name__ == "__main__":
    sys.exit(main())
