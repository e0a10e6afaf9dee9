"""GPU: fast mode, CUDA-graph replay timing, the aten margin and recorded padding decisions on the
Triton path. Run on the device machine (``bash gpu_jobs/fast_gpu.sh``); skipped without CUDA.

Every case is a fresh subprocess with a fresh Inductor cache, compiling ``x @ w`` (bf16) with
max-autotune and observing Inductor's own callbacks (what it offered and what it benchmarked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
# the packaged mm ranking that puts a template first on 128x768x2 and is trusted (trained on replay timings)
# is the H200's: on another GPU (the H100's ranking is timed per call) fast mode keeps aten alone there
needs_the_h200_ranking = pytest.mark.skipif(
    torch.cuda.is_available() and torch.cuda.get_device_name() != "NVIDIA H200",
    reason="the packaged mm ranking that puts a template first on this GEMM is the H200's: on another GPU fast "
           "mode keeps cuBLAS alone, so there is no template to time or to compile once")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys, torch
import ah_plugin
from ah_plugin.inductor import adapter as inductor
from ah_plugin.policy import ChoicePolicy, registry
from ah_plugin.inductor import compile_tools
ah_plugin.require_active_from_environment()
inductor.install()
records = []
compile_tools.observe_autotunings(records)
spec = json.loads(sys.argv[1])
if spec.get("policy_keep_two"):
    class KeepTwo(ChoicePolicy):
        op_names = {"mm"}
        def select(self, request):
            triton = [c for c in request.candidates if c.startswith("type=triton")]
            return ["extern_mm"] + triton[:1]
    registry.register_policy(KeepTwo(), registry.POSITION_CACHE)
out = {"matches": [], "aten_calls": []}
for m, k, n in spec["shapes"]:
    torch.compiler.reset()
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    f = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs", dynamic=False)
    from torch._inductor.utils import run_and_get_code
    res, codes = run_and_get_code(f, a, b)
    out["matches"].append(bool(torch.allclose(res.float(), (a @ b).float(), rtol=2e-2, atol=2e-1)))
    out["aten_calls"].append(any("extern_kernels.mm(" in code for code in codes))
    padded_n = n + (-n) % 8  # a padded (k, n) operand in the generated code: the pad_mm pass padded it
    out.setdefault("padded", []).append(n != padded_n and any(f"({k}, {padded_n})" in code for code in codes))
out["records"] = [r for r in records if r.get("op", "mm") == "mm"]
out["status"] = {k: (v if isinstance(v, (int, float, str, list, dict)) else str(v))
                 for k, v in ah_plugin.status().items()}
print("RESULT " + json.dumps(out))
'''


def _child(tmp_path, name, spec, **env_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache_{name}"), PYTHONPATH=REPO, **env_vars)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    print(f"\n{name}: {json.dumps(result['records'])[:600]}")
    return result


def test_fast_mode_with_the_packaged_artifact_keeps_aten_or_times_a_template_against_it(tmp_path):
    """The packaged MMRankingH200 is trained on replay timings, so fast mode trusts its templates, but on a
    GPU never alone: every mm keeps aten, alone (nothing benchmarked) or with the ranking's template (both
    timed). 2048x768x3072 is a GEMM of its training data where cuBLAS wins: aten alone, aten in the code;
    64x2048x5632 is memory-bound within L2: aten alone too."""
    shapes = [[2048, 768, 3072], [1024, 1024, 1024], [64, 2048, 5632]]
    result = _child(tmp_path, "fast", {"shapes": shapes}, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert result["matches"] == [True] * len(shapes)
    records = [r for r in result["records"] if r["offered"]]
    assert all("extern_mm" in r["offered"] and len(r["offered"]) <= 2 for r in records), records
    assert all(r["timed"] == [] for r in records if r["offered"] == ["extern_mm"]), records
    assert records[0]["offered"] == ["extern_mm"] and result["aten_calls"][0], records
    # 64x2048x5632 bf16 is memory-bound and its 24 MB fit in L2: fast mode keeps aten alone there
    # (ah_plugin/use/l2_residency.py), whatever the ranking puts first
    assert records[-1]["offered"] == ["extern_mm"] and records[-1]["timed"] == [], records
    assert result["aten_calls"][-1], records


def test_collection_is_timed_by_replay_and_marked_in_the_log(tmp_path):
    log = tmp_path / "mm.txt"
    shapes = [[512, 1024, 768]]
    _child(tmp_path, "replay", {"shapes": shapes}, TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm",
           TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(log), AH_PLUGIN_SEARCH_SPACE="default")
    meta = json.loads(log.read_text().splitlines()[0])
    assert meta["timing"] == "cudagraph_replay"
    rows = log.read_text().splitlines()[2:]
    assert len(rows) >= 5 and any(",extern_mm," in row for row in rows)
    # per-call timing into the same path: other metadata, so the rows go to a sibling file, never mixed
    _child(tmp_path, "per_call", {"shapes": shapes}, TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm",
           TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(log), AH_PLUGIN_SEARCH_SPACE="default",
           AH_PLUGIN_TIMING="per_call")
    assert json.loads(log.read_text().splitlines()[0])["timing"] == "cudagraph_replay"
    siblings = [p for p in tmp_path.iterdir() if p.name.startswith("mm") and p != log and p.suffix == ".txt"]
    assert len(siblings) == 1 and "timing" not in json.loads(siblings[0].read_text().splitlines()[0])


def test_int8_gemms_are_collected_as_int_mm_with_the_mm_columns(tmp_path):
    """gen_data_mm --dtypes int8: every input's autotuning logged under op int_mm, with m, k, n and the int8
    dtypes, aten's choice among the timed ones, by replay."""
    shapes = tmp_path / "int8.csv"
    shapes.write_text("m,k,n,dtype\n48,4096,1024,int8\n1024,4096,4096,int8\n")
    log = tmp_path / "int_mm.txt"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--dtypes", "int8", "--shapes",
                           str(shapes), "-o", str(log), "--num-reps", "1", "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = log.read_text().splitlines()
    meta, header = json.loads(lines[0]), lines[1].split(",")
    assert meta["name"] == "int_mm" and meta["timing"] == "cudagraph_replay"
    assert {"m", "k", "n", "mat1_dtype", "mat2_stride_1"} <= set(header)
    rows = [dict(zip(header, line.split(","))) for line in lines[2:]]
    assert {(r["m"], r["k"], r["n"]) for r in rows} == {("48", "4096", "1024"), ("1024", "4096", "4096")}
    assert all(r["mat1_dtype"] == "torch.int8" for r in rows)
    assert any(r["choice"].startswith("extern_") for r in rows) and len({r["choice"] for r in rows}) > 2


def test_grouped_gemms_are_collected_as_grouped_mm_with_their_inputs_columns(tmp_path):
    """gen_data_grouped_mm on one real model's call (OLMoE's down projection at 64 tokens: 512 rows over 64
    experts): its autotuning logged under op grouped_mm, the expert count a column, aten's choice timed."""
    from torchgen_ah.moe import gen_data_grouped_mm as grouped

    index = grouped.MODEL_CALLS.index(("olmoe-1b-7b", "down", 64))
    log = tmp_path / "grouped_mm.txt"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.moe.gen_data_grouped_mm", "-o", str(log),
                           "--first-sample", str(index), "--num-samples", "1", "--num-reps", "1", "--no-progress"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = log.read_text().splitlines()
    meta, header = json.loads(lines[0]), lines[1].split(",")
    assert meta["name"] == "grouped_mm" and meta["timing"] == "cudagraph_replay"
    rows = [dict(zip(header, line.split(","))) for line in lines[2:]]
    assert {(r["in0_size_0"], r["in2_size_0"]) for r in rows} == {("512", "64")}
    assert any(r["choice"].startswith("extern_") for r in rows) and len({r["choice"] for r in rows}) > 2


def test_a_template_must_beat_aten_by_the_margin(tmp_path):
    """Aten and one template are benchmarked (replay); with a margin of 100% the template would have to
    run in half aten's time, which it does not on these shapes: aten is compiled."""
    shapes = [[2048, 2048, 2048], [256, 4096, 1024]]
    result = _child(tmp_path, "margin", {"shapes": shapes, "policy_keep_two": True},
                    AH_TUNABLE_ENABLED="0", AH_PLUGIN_ATEN_MARGIN="1.0", AH_PLUGIN_VERBOSE="1")
    assert result["matches"] == [True, True]
    assert all(len(r["timed"]) == 2 for r in result["records"]), result["records"]
    assert result["aten_calls"] == [True, True]


def test_results_cache_records_and_replays_padding(tmp_path):
    """An unaligned shape the pad_mm pass considers: the record run writes a pad_mm row next to the GEMM's
    winner; the hit run benchmarks nothing, padded or not, and computes the same result."""
    shapes = [[4097, 4097, 511]]
    results = tmp_path / "results.csv"
    env = dict(AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(results))
    record = _child(tmp_path, "record", {"shapes": shapes}, AH_TUNABLE_TUNING="1", **env)
    rows = [line.split(",") for line in results.read_text().splitlines() if not line.startswith("Validator")]
    pad_rows = [row for row in rows if row[0] == "pad_mm"]
    assert pad_rows and pad_rows[0][2] in ("pad", "no_pad"), rows
    assert any(row[0] == "mm" for row in rows), rows
    hit = _child(tmp_path, "hit", {"shapes": shapes}, AH_TUNABLE_TUNING="0", **env)
    assert record["matches"] == hit["matches"] == [True]
    assert all(r["timed"] == [] for r in hit["records"]), hit["records"]


@needs_the_h200_ranking
def test_fast_mode_leaves_a_gemm_unpadded_where_a_template_runs_either_way(tmp_path):
    """128x768x2: the packaged ranking puts a template first on it and on its padded twin 128x768x8, so fast
    mode does not pad it, in every process (the pass's own benchmark decided differently between runs), and
    times the template against cuBLAS on the GEMM as it is."""
    for name in ("first", "second"):
        result = _child(tmp_path, name, {"shapes": [[128, 768, 2]]}, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
                        AH_TUNABLE_ENABLED="0")
        assert result["matches"] == [True]
        assert result["padded"] == [False], result
        assert any(r["timed"] for r in result["records"]), result["records"]


def _triton_binaries(folder) -> list:
    """The kernel names of the binaries in a Triton cache folder (one ``<name>.json`` per compiled kernel)."""
    return sorted(p.stem for p in folder.rglob("*.json") if not p.name.startswith("__grp__"))


@needs_the_h200_ranking
def test_a_kept_template_that_wins_is_compiled_once(tmp_path):
    """128x768x2: fast mode times the ranking's template against cuBLAS and the template wins (3.7 against
    6.6 us on an H200). Its benchmark module's binary is the one the compiled graph runs: the Triton cache
    holds no binary of a graph template kernel (``triton_tem_*``). With AH_PLUGIN_COMPILE_ONCE=off it does:
    the same template compiled a second time."""
    names = {}
    for name, once in (("once", "on"), ("twice", "off")):
        triton_dir = tmp_path / f"triton_{name}"
        result = _child(tmp_path, name, {"shapes": [[128, 768, 2]]}, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
                        AH_TUNABLE_ENABLED="0", AH_PLUGIN_COMPILE_ONCE=once, TRITON_CACHE_DIR=str(triton_dir))
        assert result["matches"] == [True]
        assert not result["aten_calls"][0], "the template did not win: nothing to compile once"
        names[name] = (_triton_binaries(triton_dir), result["status"]["compile_once"])
    once, once_counts = names["once"]
    twice, twice_counts = names["twice"]
    assert once_counts["reused"] == 1 and not any(b.startswith("triton_tem") for b in once), names
    assert twice_counts["reused"] == 0 and any(b.startswith("triton_tem") for b in twice), names
    # the reused kernel found its binary: no second triton_mm binary either
    assert once.count("triton_mm") == twice.count("triton_mm") >= 1, names


def test_replay_timing_captures_on_the_cuda_graph_trees_stream():
    """During a compile that uses CUDA graphs, replay timing captures on the side stream Inductor's
    CUDA-graph trees record on, and the model compiled next uses those same trees: other side-stream work
    before the recording slowed a compiled decoder's graph 5% for the rest of the process."""
    from torch._inductor import config as inductor_config
    from torch._inductor import cudagraph_trees

    from ah_plugin.inductor import graph_trees

    a = torch.randn(64, 64, device="cuda")
    streams = []  # the stream current at each call of the timed callable: warm-up and captures

    def timed():
        streams.append(torch.cuda.current_stream())
        return a @ a

    with inductor_config.patch({"triton.cudagraphs": True}):
        used = graph_trees.capture_stream()
        assert used is not None and graph_trees.replay_time_ms(timed) > 0
    assert streams and set(streams) == {used}
    f = torch.compile(lambda x: x @ x + 1, mode="reduce-overhead")
    for _ in range(3):
        f(a)
    manager = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    assert manager is not None and manager.stream == used


@pytest.mark.parametrize("model", ["cnn", "mlp"])
def test_fast_mode_code_is_off_code_where_aten_is_kept_on_the_gpu(tmp_path, model):
    """A channels-last CNN block (no convolution ranking: cuDNN with off's lowering, no 1x1-as-mm rewrite)
    and an addmm and mm the H200 ranking keeps on cuBLAS: fast mode generates max-autotune off's code."""
    from test_off_lowering import child

    off = child(tmp_path, model, "off", DEVICE="cuda")
    fast = child(tmp_path, model, "fast", DEVICE="cuda", TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert off["equal"] and fast["equal"]
    assert fast["triton_templates"] == 0
    assert fast["fingerprint"] == off["fingerprint"] is not None
    if model == "cnn":
        assert fast["lowerings"]["off"] >= 3, fast["lowerings"]
    else:  # the ranking kept aten alone: both GEMMs lowered again as off
        assert fast["lowerings"]["fell_back"] >= 2, fast["lowerings"]
