"""Fast mode's plain-data parts on the CPU: the aten margin, replay sizing, the timing mark in logs, and
the padding decisions the results cache records and replays (real files, the real cache policy)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ah_plugin.use import aten_margin
from ah_plugin.collect import features, log_format
from ah_plugin.collect.collector import CollectorPolicy
from ah_plugin.policy import AutotuneRequest
from ah_plugin.replay_timing import MAX_CALLS, METHOD_REPLAY, MIN_CALLS, calls_for

T1, T2 = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4", "type=triton_B"


def test_margin_keeps_aten_unless_a_template_is_clearly_faster():
    timings = {"extern_mm": 10.0, T1: 9.9, T2: 12.0}
    assert aten_margin.winner(timings, 0.02) == "extern_mm"  # 1% faster is within the noise
    assert aten_margin.winner(timings, 0.0) == T1
    assert aten_margin.losing_templates(timings, None, 0.02) == {T1, T2}
    assert aten_margin.winner({"extern_mm": 10.0, T1: 9.0}, 0.02) == T1  # 10% faster wins
    assert aten_margin.winner({T1: 3.0, T2: 2.0}, 0.5) == T2  # no aten timed: the fastest
    assert aten_margin.winner({}, 0.1) is None


def test_raising_losers_to_the_aten_floor_is_idempotent():
    timings = {"extern_mm": 10.0, T1: 9.9, T2: 8.0}
    losers = aten_margin.losing_templates(timings, {"extern_mm"}, 0.02)
    floor = aten_margin.floor_time(timings, {"extern_mm"})
    for _ in range(2):  # Inductor calls feedback savers again on in-process cache hits
        for cid in losers:
            timings[cid] = max(timings[cid], floor)
        assert min(timings, key=timings.get) == T2
    assert timings[T1] == floor > 10.0


def test_replay_holds_enough_calls_for_a_measurable_graph():
    assert calls_for(0.005) == 200  # 5 us kernels: 200 calls make a 1 ms replay
    assert calls_for(2.0) == MIN_CALLS
    assert calls_for(1e-6) == MAX_CALLS
    assert calls_for(0.0) == MIN_CALLS and calls_for(float("inf")) == MIN_CALLS


def _request(timing):
    tensors = [{"size": [32, 64], "stride": [64, 1], "dtype": "torch.float32"},
               {"size": [64, 48], "stride": [48, 1], "dtype": "torch.float32"}]
    feats, num, cat = features.op_features("mm", tensors, False)
    meta = features.metadata("mm", num, cat, (9, 0), 232448, "NVIDIA H200", timing=timing)
    return AutotuneRequest("mm", features.ordered_features(feats, num, cat), meta, ["extern_mm", T1],
                           "feedback", tensors)


def test_the_log_says_how_its_choices_were_timed(tmp_path):
    replayed, per_call = tmp_path / "replay.txt", tmp_path / "per_call.txt"
    CollectorPolicy(["mm"], str(replayed)).on_timings(_request(METHOD_REPLAY), {"extern_mm": 0.01, T1: 0.02}, [])
    CollectorPolicy(["mm"], str(per_call)).on_timings(_request("per_call"), {"extern_mm": 0.01, T1: 0.02}, [])
    assert json.loads(replayed.read_text().splitlines()[0])["timing"] == METHOD_REPLAY
    # per-call logs keep upstream's metadata keys exactly (no "timing": how the official data read)
    assert "timing" not in json.loads(per_call.read_text().splitlines()[0])
    # both methods into one path: other metadata, so the second write goes to a sibling file
    written = log_format.append_rows(str(replayed), features.log_metadata(_request("per_call").metadata),
                                     ["32,64,48,64,1,48,1,torch.float32,torch.float32,True,True,False,extern_mm,0.01"])
    assert written != str(replayed)


def test_an_input_timed_by_two_methods_is_not_logged(tmp_path):
    log = tmp_path / "log.txt"
    collector = CollectorPolicy(["mm"], str(log))
    collector.on_timings(_request("mixed"), {"extern_mm": 0.01, T1: 0.02}, [])
    assert not log.exists() and collector.stats.inputs_mixed_timing == 1


# --- padding decisions in the results file ------------------------------------------------------


def _pad_request(op="pad_mm", m=4097, k=511, n=4097):
    tensors = [{"size": [m, k], "stride": [k, 1], "dtype": "torch.bfloat16"},
               {"size": [k, n], "stride": [n, 1], "dtype": "torch.bfloat16"}]
    return AutotuneRequest(op, {"using_tf32": "False"}, {"name": op}, ["pad", "no_pad"], "padding", tensors)


def test_results_cache_records_a_padding_decision_and_answers_it(tunable_env):
    import ah_plugin.tunable as tunable

    tunable.enable(True)
    tunable.tuning_enable(True)
    try:
        _record_and_answer_padding(tunable)
    finally:  # the API switches are process-wide: later tests start from the defaults
        tunable.enable(False)
        tunable.tuning_enable(True)


def _record_and_answer_padding(tunable):
    from ah_plugin.tunable import results_file
    from ah_plugin.tunable.store import store

    policy = tunable.policy()
    assert policy.padding_decision(_pad_request()) is None  # nothing recorded yet: Inductor decides
    policy.on_padding_decision(_pad_request(), True, 0.048)
    policy.on_padding_decision(_pad_request(m=4096, k=512, n=4096), False, 0.040)
    assert tunable.write_file()
    path = tunable.get_filename()
    rows = [line for line in open(path).read().splitlines() if not line.startswith("Validator")]
    assert "pad_mm,NN_4097_4097_511_ld_511_4097_bfloat16,pad,0.048" in rows
    assert "pad_mm,NN_4096_4096_512_ld_512_4096_bfloat16,no_pad,0.04" in rows

    # a fresh process reads the file: the decisions come back, exact shapes only
    store().clear()
    tunable.tuning_enable(False)
    assert policy.padding_decision(_pad_request()) is True
    assert policy.padding_decision(_pad_request(m=4096, k=512, n=4096)) is False
    assert policy.padding_decision(_pad_request(m=4099)) is None
    # with tuning off nothing new is recorded
    policy.on_padding_decision(_pad_request(m=4099), True, 0.05)
    assert policy.padding_decision(_pad_request(m=4099)) is None
    assert results_file.PAD == "pad"


@pytest.mark.parametrize("row", [
    "pad_addmm,NN_4097_4097_511_ld_511_4097_bfloat16_bias-R,pad,0.05",
    "pad_bmm,B4_NN_97_97_511_ld_511_97_float16,no_pad,0.01",
])
def test_padding_rows_of_every_padded_op_parse(tmp_path, row):
    from ah_plugin.tunable import results_file

    path = tmp_path / "r.csv"
    path.write_text(row + "\n")
    result = results_file.read_results(str(path), None)
    assert len(result.entries) == 1


# --- logs timed by different methods never mix; an artifact says how its data were timed ----------------


def _log(path, timing, rows):
    """A small mm log: one row per (m, choice, ms), marked as replay-timed when ``timing`` is set."""
    for m, choice, ms in rows:
        tensors = [{"size": [m, 64], "stride": [64, 1], "dtype": "torch.bfloat16"},
                   {"size": [64, 48], "stride": [48, 1], "dtype": "torch.bfloat16"}]
        feats, num, cat = features.op_features("mm", tensors, False)
        meta = features.log_metadata(features.metadata("mm", num, cat, (9, 0), 232448, "NVIDIA H200", timing=timing))
        row = log_format.format_row(meta, features.ordered_features(feats, num, cat), choice, ms)
        log_format.append_rows(str(path), meta, [row], log_format.header_columns(meta))
    return path


def test_merge_refuses_logs_timed_by_different_methods(tmp_path):
    from torchgen_ah.data.merge import MergeError, merge_logs

    replayed = _log(tmp_path / "replay.txt", METHOD_REPLAY, [(32, "extern_mm", 0.01), (32, T1, 0.02)])
    per_call = _log(tmp_path / "per_call.txt", None, [(64, "extern_mm", 0.01), (64, T1, 0.02)])
    with pytest.raises(MergeError, match="timed differently"):
        merge_logs(str(tmp_path / "out.txt"), [str(replayed), str(per_call)], log=lambda *_: None)
    assert not (tmp_path / "out.txt").exists()
    # the same method merges
    more = _log(tmp_path / "replay2.txt", METHOD_REPLAY, [(96, "extern_mm", 0.01), (96, T1, 0.005)])
    assert merge_logs(str(tmp_path / "out.txt"), [str(replayed), str(more)], log=lambda *_: None)[0] == 4


def test_an_artifact_from_replay_timed_data_is_trusted_by_fast_mode(tmp_path):
    from ah_plugin.use import artifact_loader
    from ah_plugin.use.ranking import trusts_templates
    from torchgen_ah.training.train_generic import train_from_log

    rows = [(m, c, t) for m in (16, 32, 64, 128, 256, 512) for c, t in (("extern_mm", 0.02), (T1, 0.01))]
    gpu = {"name": "mm", "device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H200"}
    for name, timing, trusted in (("Replay", METHOD_REPLAY, True), ("PerCall", None, False)):
        log = _log(tmp_path / f"{name}.txt", timing, rows)
        path = train_from_log(str(log), heuristic_name=f"MMRanking{name}", out_dir=str(tmp_path / name))
        assert ("timing = 'cudagraph_replay'" in open(path).read()) is trusted
        artifact_loader.clear_cache()
        [loaded] = artifact_loader.load_artifacts(((artifact_loader.SOURCE_USER, str(tmp_path / name)),))
        assert trusts_templates(loaded, gpu) is trusted
    artifact_loader.clear_cache()


MODE_PROBE = r'''
import json, torch
from ah_plugin.inductor.patches.mode_options import fused_benchmarks_entry  # the option's name on this torch
wrapper = torch._TorchCompileInductorWrapper("max-autotune", None, False)  # what torch.compile(mode=...) builds
options = {k: wrapper.config.get(k) for k in ("max_autotune", "max_autotune_gemm", "coordinate_descent_tuning",
                                            "triton.cudagraphs", "triton.enable_persistent_tma_matmul")}
options["fused_benchmarks"] = wrapper.config.get(fused_benchmarks_entry())
print(json.dumps(options))
'''


@pytest.mark.parametrize("extra, gemm_only, tma, no_fusion_benchmark", [
    ({}, True, False, True),  # fast mode, the default: no fused template benchmarked either
    ({"AH_PLUGIN_NON_GEMM": "tune"}, False, False, False),  # the user keeps max-autotune's tuning
    ({"AH_PLUGIN_TOP_K": "10"}, False, False, False),  # top-k mode: max-autotune as torch defines it
    ({"AH_PLUGIN_TOP_K": "quality"}, True, True, False),  # quality mode: GEMMs only, persistent TMA offered
    ({"AH_PLUGIN_TOP_K": "quality", "AH_PLUGIN_NON_GEMM": "tune"}, False, True, False),
])
def test_fast_mode_narrows_max_autotune_to_gemms(extra, gemm_only, tma, no_fusion_benchmark):
    from linear_child import child_env

    env = child_env(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", **extra)
    proc = subprocess.run([sys.executable, "-c", MODE_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    options = json.loads(proc.stdout.strip().splitlines()[-1])
    assert options["triton.cudagraphs"] is True  # CUDA graphs stay as the mode says
    if gemm_only:
        assert options["max_autotune_gemm"] is True
        assert options["max_autotune"] is None and options["coordinate_descent_tuning"] is None
    else:
        assert options["max_autotune"] is True and options["coordinate_descent_tuning"] is True
    assert options["triton.enable_persistent_tma_matmul"] is (True if tma else None)
    assert options["fused_benchmarks"] == (0 if no_fusion_benchmark else None)


def test_non_gemm_setting_follows_the_settings_rules(monkeypatch):
    from ah_plugin.config import settings

    monkeypatch.delenv("AH_PLUGIN_NON_GEMM", raising=False)
    try:
        settings.set_api_values(use="mm", tune_non_gemm=True)
        assert not settings.current().gemm_only
        monkeypatch.setenv("AH_PLUGIN_NON_GEMM", "skip")  # the variable wins over the argument
        assert settings.current().gemm_only
        monkeypatch.setenv("AH_PLUGIN_NON_GEMM", "sometimes")  # a bad value: warned, the default applies
        with pytest.warns(UserWarning, match="AH_PLUGIN_NON_GEMM=.sometimes. is not one of skip, tune"):
            assert not settings.current().gemm_only  # the API's True stays
        with pytest.raises(ValueError, match="tune_non_gemm"):
            settings.set_api_values(tune_non_gemm="sometimes")
    finally:
        settings.set_api_values()


def test_quality_mode_is_a_named_top_k_with_its_own_k(monkeypatch):
    """AH_PLUGIN_TOP_K=quality (or the API's top_k="quality"): the top QUALITY_TOP_K of the ranking and
    aten, GEMM-only max-autotune with persistent TMA; an integer k afterwards leaves quality mode."""
    from ah_plugin.config import settings
    from ah_plugin.use.ranking import UseOptions, choose

    monkeypatch.delenv("AH_PLUGIN_TOP_K", raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_AUTOHEURISTIC_USE", "mm")
    try:
        for set_it in (lambda: monkeypatch.setenv("AH_PLUGIN_TOP_K", "quality"),
                       lambda: settings.set_api_values(top_k="quality")):
            monkeypatch.delenv("AH_PLUGIN_TOP_K", raising=False)
            settings.set_api_values()
            set_it()
            current = settings.current()
            assert current.quality and not current.fast
            assert current.gemm_only and current.persistent_tma
            options = UseOptions.from_environment()
            assert options.quality and options.top_k == settings.QUALITY_TOP_K and options.keep_aten
            assert options.describe().startswith("k=quality:3;")
            ranking = [(f"t{i}", 1.0 / (i + 1)) for i in range(6)] + [("extern_mm", 0.01)]
            candidates = ["extern_mm"] + [f"t{i}" for i in range(6)]
            assert choose(ranking, candidates, options) == ["t0", "t1", "t2", "extern_mm"]
        monkeypatch.setenv("AH_PLUGIN_TOP_K", "5")
        current = settings.current()
        assert not current.quality and current.top_k == 5 and not current.persistent_tma
    finally:
        settings.set_api_values()


def test_quality_mode_survives_enabled_and_leaves_other_modes_their_k(monkeypatch):
    """``enabled`` restores the API layer it found (quality mode included); quality's own k never leaks into
    adaptive k's cap; a threshold means adaptive k whatever order the arguments come in."""
    import ah_plugin
    from ah_plugin.config import settings
    from ah_plugin.use.ranking import UseOptions

    for name in ("AH_PLUGIN_TOP_K", "AH_PLUGIN_TOP_K_MASS", "AH_PLUGIN_DISABLE"):
        monkeypatch.delenv(name, raising=False)
    try:
        with ah_plugin.enabled(use="mm", top_k="quality"):
            with ah_plugin.enabled(use="mm", top_k="quality", verbose=True):
                pass
            current = settings.current()
            assert current.quality and current.persistent_tma and current.gemm_only
            monkeypatch.setenv("AH_PLUGIN_TOP_K", "adaptive")  # the variable wins: adaptive, its own cap
            options = UseOptions.from_environment()
            assert options.adaptive and not options.quality and options.top_k == settings.Settings().top_k
            monkeypatch.delenv("AH_PLUGIN_TOP_K")
        for values in ({"top_k_mass": 0.5, "top_k": "quality"}, {"top_k": "quality", "top_k_mass": 0.5}):
            settings.set_api_values(use="mm", **values)
            current = settings.current()
            assert current.adaptive and not current.quality and not current.persistent_tma, values
    finally:
        settings.set_api_values()
