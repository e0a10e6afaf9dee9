"""Picks of the per-call and replay timing methods against the replay-fastest candidate, over small logs written
as the collector writes them, and over the two committed H200 logs of the same inputs."""

from __future__ import annotations

import json
import math
import os

import pytest

from ah_plugin.use import choice_ids
from ah_plugin.collect.log_format import append_rows, format_row, header_columns
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.data.ah_log import input_keys, read_log
from torchgen_ah.evaluation.studies import method_agreement as ma
from mm_log_meta import MM_LOG_METADATA

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED_REPLAY = os.path.join(ROOT, "datasets", "h200_replay", "h200_replay_mm.txt.gz")
# the H200 quality run's per-call log of the same inputs (tests/data/README.md)
COMMITTED_PER_CALL = os.path.join(ROOT, "tests", "data", "percall_mm.txt.gz")

REPLAY_META = {**MM_LOG_METADATA, "timing": "cudagraph_replay"}
BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4}
ATEN = "extern_mm"
TRITON = choice_ids.choice_id("triton", "mm", BLOCKS)
TMA = choice_ids.choice_id("triton", "mm_persistent_tma", {**BLOCKS, "num_warps": 8, "TMA_SIZE": 128})
DK = choice_ids.choice_id("subgraph", "decompose_k", {"k_split": 32})
ONLY_PER_CALL = choice_ids.choice_id("triton", "mm", {**BLOCKS, "num_stages": 5})

# name -> (m, k, n, {choice: [replay rep 1 ms, replay rep 2 ms]}, {choice: [per-call ms, ...]})
INPUTS = {
    # aten is replay-fastest; per-call picks Triton by its median (a mean of 0.015, 0.1, 0.016 would not)
    "per_call_wrong": (32, 768, 1000, {ATEN: [0.010, 0.010], TRITON: [0.012, 0.015]},
                       {ATEN: [0.020, 0.022, 0.021], TRITON: [0.015, 0.100, 0.016]}),
    # decompose-K is fastest in repetition 2, TMA in repetition 1; per-call picks decompose-K
    "replay_wrong": (64, 65536, 64, {ATEN: [0.030, 0.032], TMA: [0.029, 0.033], DK: [0.031, 0.028]},
                     {ATEN: [0.050, 0.050], TMA: [0.060, 0.060], DK: [0.040, 0.040]}),
    # both right; a choice only the per-call log timed (fastest there) and one that failed in replay do not count
    "both_right": (4096, 4096, 4096, {ATEN: [0.300, 0.300], TRITON: [0.330, 0.330], TMA: [0.250, math.inf]},
                   {ATEN: [0.310, 0.310], TRITON: [0.350, 0.350], TMA: [0.200, 0.200], ONLY_PER_CALL: [0.1, 0.1]}),
    "one_replay_rep": (128, 128, 128, {ATEN: [0.002], TRITON: [0.003]}, {ATEN: [0.004], TRITON: [0.003]}),
    "replay_only": (256, 256, 256, {ATEN: [0.002, 0.002]}, {}),
    "per_call_only": (512, 512, 512, {}, {ATEN: [0.005, 0.005]}),
}


def features(m, k, n):
    return {"m": m, "k": k, "n": n, "mat1_dtype": "torch.bfloat16", "mat2_dtype": "torch.bfloat16",
            "mat1_stride_0": k, "mat1_stride_1": 1, "mat2_stride_0": n, "mat2_stride_1": 1,
            "mat1_iscontig": True, "mat2_iscontig": True, "using_tf32": "not_float_32"}


def write_log(path, metadata, times_of, inputs=INPUTS):
    """One append per repetition, as the collector writes: repetition 1 of every input, then repetition 2 ..."""
    specs = [(features(*spec[:3]), times_of(spec)) for spec in inputs.values()]
    reps = max(len(t) for _, times in specs for t in times.values())
    for rep in range(reps):
        lines = [format_row(metadata, feats, choice, t[rep])
                 for feats, times in specs for choice, t in times.items() if rep < len(t)]
        append_rows(str(path), metadata, lines, header_columns(metadata, specs[0][0]))
    return str(path)


@pytest.fixture
def logs(tmp_path):
    replay = write_log(tmp_path / "replay_mm.txt", REPLAY_META, lambda spec: spec[3])
    per_call = write_log(tmp_path / "per_call_mm.txt", MM_LOG_METADATA, lambda spec: spec[4])
    return replay, per_call


def rows_by_shape(result):
    return {(r["m"], r["k"], r["n"]): r for r in result["inputs"]}


def test_repetitions_number_rows_per_input_and_choice_in_row_order():
    keys = ["a", "a", "b", "a", "a", "b", "a"]
    choices = ["x", "y", "x", "x", "y", "x", "x"]
    assert ma.repetitions(keys, choices).tolist() == [1, 1, 1, 2, 2, 2, 3]
    assert ma.repetitions([], []).tolist() == []


def test_repetitions_of_a_written_log(logs):
    log = read_log(logs[0])
    reps = ma.repetitions(input_keys(log.frame, log.metadata), log.frame["choice"])
    first_pass = sum(len(spec[3]) for spec in INPUTS.values())
    assert set(reps[:first_pass]) == {1} and set(reps[first_pass:]) == {2}


def test_picks_differences_and_regrets(logs):
    result = ma.report(*logs)
    rows = rows_by_shape(result)
    assert len(rows) == 3
    wrong = rows[(32, 768, 1000)]
    assert (wrong["reference"], wrong["reference_kind"], wrong["reference_us"]) == (ATEN, ma.ATEN, pytest.approx(10.0))
    assert wrong[ma.PER_CALL] == {"pick": TRITON, "differs": True, "regret": pytest.approx(1.5)}
    assert wrong[ma.REPLAY] == {"pick": ATEN, "differs": False, "regret": 1.0}
    replay_wrong = rows[(64, 65536, 64)]
    assert (replay_wrong["reference"], replay_wrong["reference_kind"]) == (DK, ma.TEMPLATE)
    assert replay_wrong[ma.REPLAY] == {"pick": TMA, "differs": True, "regret": pytest.approx(0.033 / 0.028)}
    assert replay_wrong[ma.PER_CALL]["differs"] is False
    right = rows[(4096, 4096, 4096)]
    assert right["choices"] == 2  # TMA failed in replay rep 2, ONLY_PER_CALL was never replayed
    assert right["reference"] == ATEN and not right[ma.PER_CALL]["differs"] and not right[ma.REPLAY]["differs"]


def test_summary_split_and_left_out(logs):
    result = ma.report(*logs)
    assert result["left_out"] == {"replay_only": 1, "per_call_only": 1, "one_replay_repetition": 1,
                                  "no_choice_in_both": 0}
    summary = result["summary"]
    assert summary["inputs"] == 3
    assert summary[ma.PER_CALL] == {"differs": 1, "differs_pct": pytest.approx(100 / 3),
                                    "geomean_regret": pytest.approx(1.5 ** (1 / 3)), "worst_regret": pytest.approx(1.5)}
    assert summary[ma.REPLAY]["differs"] == 1
    assert summary[ma.REPLAY]["geomean_regret"] == pytest.approx((0.033 / 0.028) ** (1 / 3))
    groups = {g["group"]: g for g in result["groups"]}
    assert (groups[ma.ATEN]["inputs"], groups[ma.TEMPLATE]["inputs"]) == (2, 1)
    assert (groups[ma.ATEN][ma.PER_CALL]["differs"], groups[ma.ATEN][ma.REPLAY]["differs"]) == (1, 0)
    assert (groups[ma.TEMPLATE][ma.PER_CALL]["differs"], groups[ma.TEMPLATE][ma.REPLAY]["differs"]) == (0, 1)


def test_duplicated_input_uses_its_first_two_rows(tmp_path):
    """An input listed twice in one pass has four repetitions: its first two rows are repetitions 1 and 2."""
    twice = {"a": (64, 64, 64, {ATEN: [0.010, 0.011, 0.009], TRITON: [0.012, 0.010, 0.008]},
                   {ATEN: [0.010, 0.010], TRITON: [0.020, 0.020]})}
    replay = write_log(tmp_path / "replay_mm.txt", REPLAY_META, lambda spec: spec[3], twice)
    per_call = write_log(tmp_path / "per_call_mm.txt", MM_LOG_METADATA, lambda spec: spec[4], twice)
    result = ma.report(replay, per_call)
    (row,) = result["inputs"]
    assert row["replay_repetitions"] == 3 and result["more_replay_repetitions"] == 1
    assert row["reference"] == TRITON and row[ma.REPLAY]["pick"] == ATEN  # rep 3 (TRITON 0.008) is not used
    assert row[ma.REPLAY]["regret"] == pytest.approx(1.1)


def test_short_choice_names():
    assert ma.short_choice(ATEN) == "aten"
    assert ma.short_choice("extern_addmm") == "aten (addmm)"
    assert ma.short_choice(TRITON) == "triton 64x32x128 s3 w4"
    assert ma.short_choice(TRITON + "#2") == "triton 64x32x128 s3 w4"
    assert ma.short_choice(TMA) == "tma 64x32x128 s3 w8"
    assert ma.short_choice(DK) == "decompose-K split=32"
    assert ma.short_choice("cpp_micro_bm4_bn16_bk1") == "cpp_micro_bm4_bn16_bk1"


def test_main_prints_the_report_and_writes_json_and_section(logs, tmp_path, capsys):
    results, out = tmp_path / "RESULTS.md", tmp_path / "out.json"
    assert ma.main(["--replay", logs[0], "--per-call", logs[1], "--results", str(results), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(ma.TITLE)
    assert "| 3 | any | 1 (33.3%) | 1 (33.3%) |" in text
    row = "| 32x768x1000 | bfloat16 | NN | aten | 10.0 | triton 64x32x128 s3 w4 | 1.500 | (reference) | 1.000 |"
    assert row in text
    assert "1 only in the replay log, 1 only in the per-call log, 1 with one replay repetition" in text
    section = results.read_text()
    assert "<!-- BEGIN method_agreement -->" in section and ma.TITLE in section
    assert json.loads(out.read_text())["summary"]["inputs"] == 3


def test_wrong_timing_methods_are_refused(logs, tmp_path, capsys):
    replay, per_call = logs
    assert ma.main(["--replay", per_call, "--per-call", per_call]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m torchgen_ah.evaluation.studies.method_agreement: error: ") and per_call in err and "--replay" in err
    assert ma.main(["--replay", replay, "--per-call", replay]) == 2
    err = capsys.readouterr().err
    assert replay in err and "--per-call log is timed by CUDA-graph replay" in err


def test_logs_of_other_devices_are_refused(logs, tmp_path):
    other = write_log(tmp_path / "a100.txt", {**MM_LOG_METADATA, "device_capa": (8, 0)}, lambda spec: spec[4])
    with pytest.raises(ValueError, match="a100.txt:1: metadata differs .* device_capa"):
        ma.report(logs[0], other)


def test_missing_log_names_the_file(logs, tmp_path, capsys):
    missing = str(tmp_path / "nope.txt.gz")
    assert ma.main(["--replay", logs[0], "--per-call", missing]) == 2
    assert f"python -m torchgen_ah.evaluation.studies.method_agreement: error: {missing}" in capsys.readouterr().err


@pytest.mark.skipif(not (os.path.exists(COMMITTED_REPLAY) and os.path.exists(COMMITTED_PER_CALL)),
                    reason="the committed H200 logs (datasets/h200_replay/h200_replay_mm.txt.gz, "
                           "tests/data/percall_mm.txt.gz) are not in this checkout")
def test_committed_h200_logs():
    keys = []
    for path in (COMMITTED_REPLAY, COMMITTED_PER_CALL):
        log = read_log(path)
        keys.append(set(input_keys(log.frame, log.metadata)))
    # 69 GEMMs collected: 1x4096x4096 logged no mm autotuning, and 4095^3 is padded to 4096^3, another input's
    # features (that input has four repetitions)
    assert keys[0] == keys[1] and len(keys[0]) == 67
    result = ma.report(COMMITTED_REPLAY, COMMITTED_PER_CALL)
    rows, summary = result["inputs"], result["summary"]
    assert summary["inputs"] == len(rows) == 67 and {r["key"] for r in rows} == keys[0]
    assert set(result["left_out"].values()) == {0} and result["more_replay_repetitions"] == 1
    assert sum(g["inputs"] for g in result["groups"]) == len(rows)
    for method in ma.METHODS:
        regrets = [r[method]["regret"] for r in rows]
        assert all(x >= 1.0 for x in regrets)  # the reference is the fastest of the run regrets are read on
        assert all((r[method]["regret"] == 1.0) or r[method]["differs"] for r in rows)
        assert summary[method]["differs"] == sum(r[method]["differs"] for r in rows)
        assert summary[method]["differs"] == sum(g[method]["differs"] for g in result["groups"])
        assert summary[method]["differs_pct"] == pytest.approx(100 * summary[method]["differs"] / len(rows))
        assert summary[method]["geomean_regret"] == pytest.approx(geomean(regrets))
        assert summary[method]["worst_regret"] == max(regrets)
    for r in rows:
        assert r["reference_kind"] == (ma.ATEN if r["reference"].startswith("extern_") else ma.TEMPLATE)
    text = ma.markdown(result, "cmd")
    either = sum(r[ma.PER_CALL]["differs"] or r[ma.REPLAY]["differs"] for r in rows)
    assert f"({either} of 67," in text
    per_input = text.split("Inputs where either pick differs")[1]
    assert per_input.count("\n| ") == either + 2  # header, rule, one line per input
