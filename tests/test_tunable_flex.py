"""The results cache for FlexAttention: its rows' key, the policy on real flex requests, and the key's context
taken from a real Inductor lowering of flex_attention on the CPU (the GPU half, a recorded winner answering a
second process: tests/test_flex_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import ah_plugin.tunable as tunable
from ah_plugin.policy import AutotuneRequest
from ah_plugin.tunable import flex_params
from ah_plugin.tunable import params as P
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import settings as S
from ah_plugin.tunable.policy import heuristic_top1
from ah_plugin.tunable.store import store
from ah_plugin.use import flex_ranking

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = "flexdecode_BLOCK-N=128_numstages=3_numwarps=2"
OFF = "flexdecode_BLOCK-N=64_numstages=1_numwarps=2"
SLOW = "flexdecode_BLOCK-N=32_numstages=3_numwarps=2"
KEY = "B8_Hq32_Hkv8_Lq1_Lkv4096_D128_Dv128_bfloat16_blk128x128_fn-3f9a0c21"
H200 = {"name": "flex_decoding", "device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H200"}


pytestmark = pytest.mark.usefixtures("tunable_api_state")


def decode_request(kv_seq=4096, functions="3f9a0c21", blocks=(128, 128), candidates=(FAST, OFF, SLOW)):
    """The decoding kernel's autotuning as the adapter describes it: grouped query, key, value."""
    q = [8, 8, 4, 1, 128]
    kv = [8, 8, kv_seq, 128]
    tensors = [{"size": size, "stride": [1] * len(size), "dtype": "torch.bfloat16"} for size in (q, kv, kv)]
    features, _, _ = flex_ranking.flex_features(tensors)
    context = {} if functions is None else {flex_ranking.CONTEXT_SPARSE_BLOCKS: blocks,
                                            flex_ranking.CONTEXT_FUNCTIONS: functions}
    return AutotuneRequest(op_name="flex_decoding", features=features, metadata={}, candidates=list(candidates),
                           tensors=tensors, context=context)


def test_the_key_reads_back_and_bad_keys_say_what_is_wrong():
    key = P.from_request("flex_decoding", decode_request().features, [], decode_request().context)
    assert key.encode() == KEY and P.parse_for("flex_decoding", KEY) == key and key.wildcards == 0
    other = P.from_request("flex_decoding", decode_request().features, [], decode_request(functions="00000000").context)
    assert other != key  # another mask or score function at the same sizes: another row
    assert P.from_request("flex_decoding", decode_request().features, [], {}) is None  # no context: no key
    with pytest.raises(P.ParamsError, match="no wildcards"):
        P.parse_for("flex_attention", KEY.replace("B8", "B*"))
    with pytest.raises(P.ParamsError, match="_blk<q block>x<kv block>_fn-<8 hex digits>"):
        P.parse_for("flex_attention", "B8_Hq32_Hkv8_Lq1_Lkv4096_D128_Dv128_bfloat16")
    with pytest.raises(P.ParamsError, match="is not"):  # a GEMM key is no flex key, and the reverse
        P.parse_for("flex_attention", "NT_64_48_32_ld_32_32_float16")
    with pytest.raises(P.ParamsError):
        P.parse_for("mm", KEY)


def test_a_winner_is_recorded_written_and_answered_alone_in_the_next_run(tmp_path):
    tunable.enable(True)
    policy = tunable.policy()
    assert policy.select(decode_request()) is None  # a miss with tuning on: Inductor times what it offers
    policy.on_timings(decode_request(), {FAST: 0.011, OFF: 0.020, SLOW: 0.031}, [])
    assert tunable.write_file()
    path = tunable.get_filename()
    with open(path, encoding="utf-8") as handle:
        assert f"flex_decoding,{KEY},{FAST},0.011\n" in handle.read()

    store().clear()  # the next run: the file's row answers, with one config, so nothing is timed
    assert policy.select(decode_request()) == [FAST]
    assert policy.select(decode_request(functions="00000000")) is None  # another mask: a miss
    assert policy.select(decode_request(blocks=(64, 64))) is None  # another block size: a miss
    with pytest.warns(F.TunableFileWarning, match=rf"results0.csv:\d+: solution '{FAST}'.*not among today's"):
        assert policy.select(decode_request(candidates=(OFF, SLOW))) is None  # stale: a miss, said
    stats = tunable.get_stats()
    assert (stats["hits"], stats["misses"], stats["stale"]) == (1, 3, 1)


def test_the_recorded_winner_beats_offs_config_by_the_margin_or_is_offs_config(monkeypatch):
    """Where the plugin decided the configs, the lowering noted off's default config (the context's
    ``flex_off_configs``): the results cache records a config that beats it by less than the aten margin as
    off's, the kernel the adapter's margin makes Inductor compile, and the key is the same with or without it."""
    monkeypatch.delenv("AH_PLUGIN_ATEN_MARGIN", raising=False)  # the default margin, 2%
    tunable.enable(True)
    policy = tunable.policy()

    def noted(kv_seq):
        request = decode_request(kv_seq=kv_seq)
        request.context[flex_ranking.CONTEXT_OFF_CONFIGS] = {"flex_decoding": OFF}
        return request

    assert P.from_request("flex_decoding", noted(4096).features, [], noted(4096).context).encode() == KEY
    policy.on_timings(noted(4096), {FAST: 0.0197, OFF: 0.0200, SLOW: 0.031}, [])  # 1.5% faster: within the noise
    policy.on_timings(noted(8192), {FAST: 0.0180, OFF: 0.0200}, [])  # 10% faster: it wins
    policy.on_timings(decode_request(kv_seq=2048), {FAST: 0.0197, OFF: 0.0200}, [])  # off's not noted: the fastest
    recorded = {params.split("_")[4]: solution for op, params, solution, _ in tunable.get_results()}
    assert recorded == {"Lkv4096": OFF, "Lkv8192": FAST, "Lkv2048": FAST}


def test_a_call_without_its_context_is_left_alone_and_tuning_off_records_no_flex_row(monkeypatch):
    tunable.enable(True)
    policy = tunable.policy()
    unkeyed = decode_request(functions=None)
    assert policy.select(unkeyed) is None
    policy.on_timings(unkeyed, {FAST: 0.011, OFF: 0.020}, [])
    assert tunable.get_results() == ()
    monkeypatch.setenv(S.TUNING, "0")
    monkeypatch.setenv(S.RECORD_UNTUNED, "1")
    assert policy.select(decode_request()) is None  # no aten kernel to answer with: the hook's configs stand
    assert not os.path.exists(tunable.get_untuned_filename())  # no offline tuning for a flex call: not recorded
    # on the H200 the shipped FlexDecodingH200 ranks this call, so the heuristic has a first config to give;
    # a flex miss still keeps every offered config (one never timed is no answer)
    on_h200 = decode_request()
    on_h200.metadata.update(H200)
    assert heuristic_top1(on_h200) == FAST
    monkeypatch.setenv(S.USE_HEURISTIC_TOP1, "1")
    assert policy.select(on_h200) is None


def test_an_fp8_call_has_a_key_and_a_default_flex_row_is_refused(tmp_path):
    tensors = [dict(t, dtype="torch.float8_e4m3fn") for t in decode_request().tensors]
    features, _, _ = flex_ranking.flex_features(tensors)
    key = P.from_request("flex_decoding", features, [], decode_request().context)
    assert key is not None and "_float8_e4m3fn_blk128x128_" in key.encode()
    assert P.parse_for("flex_decoding", key.encode()) == key
    results = tmp_path / "mine.csv"
    other = KEY.replace("Lkv4096", "Lkv2048")
    results.write_text(f"flex_decoding,{other},{FAST},0.011\nflex_decoding,{KEY},{F.DEFAULT_SOLUTION},0.011\n",
                       encoding="utf-8")
    with pytest.warns(F.TunableFileWarning, match=r"mine.csv:2: .*Default \(aten\) is no choice"):
        tunable.read_file(str(results))
    assert [row[:3] for row in tunable.get_results()] == [("flex_decoding", other, FAST)]


def test_bad_flex_rows_are_named_by_file_and_line_and_untuned_flex_rows_are_refused(tmp_path):
    results = tmp_path / "mine.csv"
    results.write_text(f"flex_decoding,{KEY},{FAST},0.011\n"
                       f"flex_decoding,{KEY.replace('B8', 'B*')},{FAST},0.011\n"
                       f"flex_attention,B8_Hq32,{FAST},0.011\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert tunable.read_file(str(results))
    said = [str(w.message) for w in record if issubclass(w.category, F.TunableFileWarning)]
    assert any("mine.csv:2:" in m and "no wildcards" in m for m in said), said
    assert any("mine.csv:3:" in m and "is not B<batch>" in m for m in said), said
    assert [row[:3] for row in tunable.get_results()] == [("flex_decoding", KEY, FAST)]

    untuned = tmp_path / "untuned.csv"
    untuned.write_text(f"flex_decoding,{KEY}\nmm,NT_64_48_32_ld_32_32_float16\n", encoding="utf-8")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert F.read_untuned(str(untuned)) == [("mm", "NT_64_48_32_ld_32_32_float16")]
    assert any("untuned.csv:1:" in str(w.message) and "cannot be rebuilt offline" in str(w.message) for w in record)


CONTEXT_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    from torch._inductor import lowering
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    import ah_plugin
    ah_plugin.install()
    import torch._inductor.kernel.flex.flex_attention  # noqa: F401 - registers the lowering
    from ah_plugin.inductor.patches import flex_lowering

    seen = []
    plugin_lowering = lowering.lowerings[torch.ops.higher_order.flex_attention]

    def observed(*args, **kwargs):  # Inductor's real arguments, read as the plugin's lowering reads them
        seen.append(flex_lowering.call_context(args, kwargs))
        return plugin_lowering(*args, **kwargs)

    lowering.lowerings[torch.ops.higher_order.flex_attention] = observed

    def causal(b, h, q, kv):
        return q >= kv

    def window(b, h, q, kv):
        return (q >= kv) & (q - kv < 64)

    # three buffers: torch 2.11's CPU lowering refuses a query, key and value that share one
    q, k, v = (torch.randn(1, 2, 128, 16) for _ in range(3))
    for mask, block in ((causal, 128), (window, 128), (causal, 64)):
        torch.compiler.reset()
        block_mask = create_block_mask(mask, 1, 1, 128, 128, device="cpu", BLOCK_SIZE=block)
        out = torch.compile(flex_attention)(q, k, v, block_mask=block_mask)
        assert torch.allclose(out, flex_attention(q, k, v, block_mask=block_mask), atol=1e-5)
    print(json.dumps([{k: list(v) if isinstance(v, tuple) else v for k, v in c.items()} for c in seen]))
""")


@pytest.mark.slow
def test_the_key_context_comes_from_inductors_own_lowering_arguments_and_is_the_same_in_every_process(tmp_path):
    """Real compiles of flex_attention on the CPU (Inductor's C++ flex kernel; the Triton one autotunes on a
    GPU only), in two fresh processes with Inductor's caches off: the block sizes are the mask's, the digest
    tells the causal mask from the sliding window, and a second process computes the same digests (a results
    file is written by one run and read by the next)."""
    env = dict(os.environ, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", CONTEXT_SCRIPT], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        runs.append(done.stdout.strip().splitlines()[-1])
    assert runs[0] == runs[1]
    import json

    causal, window, causal_64 = json.loads(runs[0])
    blocks, functions = flex_ranking.CONTEXT_SPARSE_BLOCKS, flex_ranking.CONTEXT_FUNCTIONS
    assert (causal[blocks], window[blocks], causal_64[blocks]) == ([128, 128], [128, 128], [64, 64])
    assert causal[functions] != window[functions]
    assert causal[functions] == causal_64[functions]  # same function; the block size is a field of its own
    key = flex_params.from_request({"batch": 1, "q_heads": 2, "kv_heads": 2, "q_seq": 128, "kv_seq": 128,
                                    "qk_head_dim": 16, "v_head_dim": 16, "dtype": "torch.float32"},
                                   {blocks: tuple(causal[blocks]), functions: causal[functions]})
    assert key is not None and key.encode().endswith(f"_float32_blk128x128_fn-{causal[functions]}")
