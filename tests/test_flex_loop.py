"""FlexAttention's loop on the CPU, from rows logged on the H200: collection writes them, the trainer learns a
ranking from them, and use mode keeps what the rule allows (the GPU half: tests/test_flex_gpu.py).

The rows are ``datasets/h200_flex/flex_decoding_map.txt`` and ``..._gen.txt``: every config of default
max-autotune's decoding search, timed by CUDA-graph replay on an H200. Inductor's flex config hook needs a
GPU, so ``flex_choices.configs`` is given Inductor's own config objects (``FlexDecodeConfig``) through a
function standing for that hook; everything else is the plugin's real code and real files.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from ah_plugin.config import settings  # noqa: E402
from ah_plugin.use import artifact_loader, flex_ranking  # noqa: E402
from ah_plugin.collect.collector import CollectorPolicy  # noqa: E402
from ah_plugin.inductor import flex_choices  # noqa: E402
from ah_plugin.inductor.requests import described_request  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "datasets", "h200_flex")
H200 = {"device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H200"}


def logged_inputs(*names: str) -> dict[tuple, dict[str, float]]:
    """{input features (as a tuple of the log's columns): {config id: ms}} of H200 logs in datasets/h200_flex."""
    out: dict[tuple, dict[str, float]] = {}
    for name in names:
        with open(os.path.join(DATA, name), encoding="utf-8") as handle:
            next(handle)
            for row in csv.DictReader(handle):
                key = tuple((c, row[c]) for c in flex_ranking.NUMERICAL + flex_ranking.CATEGORICAL)
                out.setdefault(key, {})[row["choice"]] = float(row["feedback"])
    return out


def described(features: dict) -> list[dict]:
    """The query (grouped per key head, as the decoding kernel's autotuning sees it), key and value."""
    b, hq, hkv = features["batch"], features["q_heads"], features["kv_heads"]
    q = [b, hkv, hq // hkv, features["q_seq"], features["qk_head_dim"]]
    kv = [b, hkv, features["kv_seq"], features["qk_head_dim"]]
    return [{"size": size, "stride": [1] * len(size), "dtype": features["dtype"]} for size in (q, kv, kv)]


def test_ids_features_and_the_rule_on_plain_data():
    assert flex_ranking.config_id("flex_decoding", {"BLOCK_N": 64, "num_stages": 3, "num_warps": 2}) == \
        "flexdecode_BLOCK-N=64_numstages=3_numwarps=2"
    assert flex_ranking.op_of_id("flexbwd_BLOCK-M1=64") == "flex_attention_backward"
    grouped = flex_ranking.flex_features(described({"batch": 8, "q_heads": 32, "kv_heads": 8, "q_seq": 1,
                                                    "kv_seq": 4096, "qk_head_dim": 128, "dtype": "torch.bfloat16"}))[0]
    plain = [{"size": [8, 32, 1, 128], "stride": [1] * 4, "dtype": "torch.bfloat16"},
             {"size": [8, 8, 4096, 128], "stride": [1] * 4, "dtype": "torch.bfloat16"},
             {"size": [8, 8, 4096, 128], "stride": [1] * 4, "dtype": "torch.bfloat16"}]
    assert grouped == flex_ranking.flex_features(plain)[0]  # the lowering's query and the autotuning's agree
    offered = ["a", "b", "c", "off"]
    assert flex_ranking.choose(["b", "a", "c"], offered, "off", quality=False) == ["b", "off"]
    assert flex_ranking.choose(["b", "a", "c"], offered, "off", quality=False, sure=True) == ["b"]
    assert flex_ranking.choose(["b", "a", "c"], offered, "off", quality=True) == ["b", "a", "c", "off"]
    assert flex_ranking.choose(None, offered, "off", quality=False) == ["off"]
    assert flex_ranking.choose(["zz"], offered, "off", quality=True) == offered  # an id no longer offered


def test_collected_rows_train_a_ranking_whose_kept_configs_hold_the_best(tmp_path):
    """Collection: the collector writes the H200's rows as it would from a real autotuning; training: the
    generic trainer learns from that log; use: for every logged call, fast mode keeps the ranking's first
    config and off's, and one of them is within 5% of the fastest config measured for it."""
    inputs = logged_inputs("flex_decoding_map.txt", "flex_decoding_gen.txt")
    assert len(inputs) >= 8
    log = tmp_path / "flex_decoding.txt"
    collector = CollectorPolicy(ops=["flex_decoding"], log_path=str(log))
    for key, times in inputs.items():
        features = {name: (value if name == "dtype" else int(value)) for name, value in key}
        request = described_request("flex_decoding", described(features), torch.device("cpu"), list(times),
                                    "feedback", timing="cudagraph_replay")
        request.metadata.update(H200)
        collector.on_timings(request, times, [])
    lines = log.read_text().splitlines()
    assert json.loads(lines[0])["name"] == "flex_decoding" and len(lines) == 2 + sum(map(len, inputs.values()))

    out = tmp_path / "artifacts"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.train_generic", str(log), "--heuristic-name",
                           "FlexDecodingTest", "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    artifact = artifact_loader.select("flex_decoding", {"name": "flex_decoding", **H200},
                                      artifact_loader.artifact_dirs(str(out), package=False))
    assert artifact is not None and artifact.name == "FlexDecodingTest"

    off = "flexdecode_BLOCK-N=64_numstages=1_numwarps=2"  # what max-autotune off runs on an H200 (torch 2.11)
    for key, times in inputs.items():
        features = {name: (value if name == "dtype" else int(value)) for name, value in key}
        ranked = [cid for cid, _ in artifact.rank(features)]
        kept = flex_ranking.choose(ranked, list(times), off, quality=False)
        assert off in kept and len(kept) <= 2
        assert min(times[c] for c in kept) <= 1.05 * min(times.values()), (features, kept, times)


def test_use_mode_narrows_inductors_decoding_configs_with_the_shipped_h200_ranking():
    """``flex_choices.configs``: default max-autotune's list asked for, ranked by the packaged
    FlexDecodingH200, fast mode keeping the first and off's config (as Inductor's config objects), quality
    mode three and off's; without the use variable Inductor's own list stands."""
    from torch._inductor.template_heuristics.triton import FlexDecodeConfig

    autotuned = [FlexDecodeConfig(64, 3, 2), FlexDecodeConfig(32, 3, 2), FlexDecodeConfig(128, 3, 2)]
    off_config = FlexDecodeConfig(64, 1, 2)

    def ask():  # Inductor's hook, as it answers on an H200 (torch 2.11)
        from torch._inductor import config

        return (autotuned + [off_config]) if config.max_autotune else [off_config]

    call = described({"batch": 8, "q_heads": 32, "kv_heads": 8, "q_seq": 1, "kv_seq": 4096, "qk_head_dim": 128,
                      "dtype": "torch.bfloat16"})
    fast = settings.Settings(use=frozenset({"flex_decoding"}))
    kept = flex_choices.configs("flex_decoding", ask, 128, torch.bfloat16, "cuda", fast, call, dict(H200))
    assert kept == [FlexDecodeConfig(128, 3, 2), off_config]  # the fastest config measured there, and off's
    quality = settings.Settings(use=frozenset({"flex_decoding"}), quality=True)
    kept = flex_choices.configs("flex_decoding", ask, 128, torch.bfloat16, "cuda", quality, call, dict(H200))
    assert len(kept) == 4 and kept[-1] == off_config
    unused = settings.Settings(use=frozenset({"mm"}))
    assert flex_choices.configs("flex_decoding", ask, 128, torch.bfloat16, "cuda", unused, call, dict(H200)) == \
        [off_config]
    elsewhere = dict(H200, device_name="NVIDIA H100 80GB HBM3")  # the ranking is the H200's: off's config alone
    assert flex_choices.configs("flex_decoding", ask, 128, torch.bfloat16, "cuda", fast, call, elsewhere) == \
        [off_config]


def test_the_flex_hooks_pass_inductors_arguments_on_as_given():
    """Torch 2.14 put ``seq_len`` between the head dim and the dtype of the forward hook: the plugin's hooks
    take what Inductor gives and read the head dim and dtype by the parent's own signature."""
    from ah_plugin.inductor.flex_choices import hook_arguments

    class Parent:
        def old(self, head_dim, dtype, device_type="cuda"):
            return head_dim, dtype, device_type

        def new(self, head_dim, seq_len, dtype, device_type="cuda"):
            return head_dim, dtype, device_type

    parent = Parent()
    assert hook_arguments(parent.old, (128, torch.bfloat16), {}) == (128, torch.bfloat16, "cuda")
    assert hook_arguments(parent.new, (64, 4096, torch.float16, "cpu"), {}) == (64, torch.float16, "cpu")
    assert hook_arguments(parent.new, (64,), {"seq_len": 1, "dtype": torch.float32}) == (64, torch.float32, "cuda")


def test_a_kept_config_replaces_offs_only_when_faster_by_the_margin():
    """Fast mode keeps the ranking's first config and off's, and Inductor keeps the faster: the decision notes
    off's config in the flex call's session, and the adapter's margin (as for a template against aten) raises
    a kept config that beats it by less than the margin to just above off's time, so Inductor's minimum is
    off's config; a config faster by more still wins. Inductor's timings dict is keyed by its callers."""
    from torch._inductor.template_heuristics.triton import FlexDecodeConfig

    from ah_plugin.inductor import autotune, session
    from ah_plugin.use import aten_margin

    off_config = FlexDecodeConfig(64, 1, 2)

    def ask():
        from torch._inductor import config

        return [FlexDecodeConfig(128, 3, 2), off_config] if config.max_autotune else [off_config]

    tensors = described({"batch": 8, "q_heads": 32, "kv_heads": 8, "q_seq": 1, "kv_seq": 4096, "qk_head_dim": 128,
                         "dtype": "torch.bfloat16"})
    fast = settings.Settings(use=frozenset({"flex_decoding"}))
    call = session.FlexCall(tensors)
    with session.opened(call):
        kept = flex_choices.configs("flex_decoding", ask, 128, torch.bfloat16, "cuda", fast, None, dict(H200))
    ids = [flex_ranking.config_id("flex_decoding", flex_choices.config_params("flex_decoding", c)) for c in kept]
    off = "flexdecode_BLOCK-N=64_numstages=1_numwarps=2"
    assert ids == ["flexdecode_BLOCK-N=128_numstages=3_numwarps=2", off]
    baseline = aten_margin.baseline("flex_decoding", ids, call.context)
    assert baseline == {off}

    callers = [object(), object()]  # Inductor's choice callers, in the kept configs' order
    close = {callers[0]: 0.0197, callers[1]: 0.0200}  # the ranked config 1.5% faster: within the noise
    autotune._apply_margin(close, callers, ids, 0.02, baseline)
    assert min(close, key=close.get) is callers[1] and close[callers[0]] > 0.0200
    clear = {callers[0]: 0.0150, callers[1]: 0.0200}
    autotune._apply_margin(clear, callers, ids, 0.02, baseline)
    assert clear == {callers[0]: 0.0150, callers[1]: 0.0200}
    assert aten_margin.baseline("flex_decoding", ids, {}) == set()  # configs not decided by the plugin: no margin
    assert aten_margin.baseline("mm", ["extern_mm", "triton_mm_1"]) == {"extern_mm"}
