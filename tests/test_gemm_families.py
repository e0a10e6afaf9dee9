"""The GEMM-family report over a small replay-timed mm log written as the collector writes it."""

from __future__ import annotations

import json
import math

import pytest

from ah_plugin.use import choice_ids
from ah_plugin.collect.log_format import append_rows, format_row, header_columns
from torchgen_ah.evaluation.studies import gemm_families as gf
from mm_log_meta import MM_LOG_METADATA

REPLAY_META = {**MM_LOG_METADATA, "timing": "cudagraph_replay"}
BLOCKS = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4}
ATEN = "extern_mm"
TRITON = choice_ids.choice_id("triton", "mm", BLOCKS)
TRITON_2 = choice_ids.choice_id("triton", "mm", {**BLOCKS, "num_stages": 4})
TMA = choice_ids.choice_id("triton", "mm_persistent_tma", {**BLOCKS, "NUM_SMS": 132})
DK = choice_ids.choice_id("subgraph", "decompose_k", {"k_split": 32})
OTHER = choice_ids.choice_id("triton", "mm_foo", BLOCKS)

# (m, k, n, dtype, mat2 transposed, {choice: (rep 1 ms, rep 2 ms)})
INPUTS = [
    (128, 4096, 4096, "bfloat16", False,  # persistent TMA beats aten
     {ATEN: (0.020, 0.022), TRITON: (0.025, 0.025), TRITON_2: (math.inf, math.inf), TMA: (0.014, 0.016),
      DK: (0.030, 0.030)}),
    (4096, 4096, 4096, "bfloat16", False,  # aten wins
     {ATEN: (0.300, 0.300), TRITON: (0.330, 0.330), TMA: (0.306, 0.306)}),
    (64, 16384, 64, "float32", False,  # decompose-K wins; Triton within the margin; another template
     {ATEN: (0.050, 0.050), TRITON: (0.0495, 0.0495), DK: (0.040, 0.040), OTHER: (0.060, 0.060)}),
    (128, 4096, 4096, "bfloat16", True,  # input 1's sizes with mat2 transposed: another input; Triton wins
     {ATEN: (0.025, 0.025), TRITON: (0.024, 0.024)}),
    (256, 256, 256, "bfloat16", False, {TRITON: (0.005, 0.005)}),  # no aten time: left out
]


def features(m, k, n, dtype, mat2_t):
    return {"m": m, "k": k, "n": n, "mat1_dtype": f"torch.{dtype}", "mat2_dtype": f"torch.{dtype}",
            "mat1_stride_0": k, "mat1_stride_1": 1,
            "mat2_stride_0": 1 if mat2_t else n, "mat2_stride_1": k if mat2_t else 1,
            "mat1_iscontig": True, "mat2_iscontig": not mat2_t,
            "using_tf32": True if dtype == "float32" else "not_float_32"}


def write_log(path, metadata=REPLAY_META, inputs=INPUTS):
    for rep in (0, 1):  # the collector logs repetition after repetition
        lines = [format_row(metadata, features(*spec[:5]), choice, times[rep])
                 for spec in inputs for choice, times in spec[5].items()]
        append_rows(str(path), metadata, lines, header_columns(metadata, features(*INPUTS[0][:5])))
    return str(path)


@pytest.fixture
def log(tmp_path):
    return write_log(tmp_path / "h200_replay_mm.txt")


def by_family(result):
    return {f["family"]: f for f in result["families"]}


def test_family_of_each_choice_id():
    ids = (ATEN, "extern_addmm", TRITON, TRITON + "#2", TMA, DK, OTHER)
    assert [gf.family(c) for c in ids] == [gf.ATEN, gf.ATEN, gf.TRITON, gf.TRITON, gf.TMA, gf.DECOMPOSE_K, "mm_foo"]


def test_per_input_times_and_best_family(log):
    result = gf.report([log])
    assert result["inputs_without_aten"] == 1
    rows = {(r["m"], r["k"], r["n"], r["layout"]): r for r in result["inputs"]}
    assert len(rows) == 4
    tma_wins = rows[(128, 4096, 4096, "NN")]
    assert tma_wins["aten_us"] == pytest.approx(21.0)  # median of 20 and 22 us
    assert tma_wins["best_us"][gf.TMA] == pytest.approx(15.0)
    assert tma_wins["best_us"][gf.TRITON] == pytest.approx(25.0)  # the failed config does not count
    assert tma_wins["best_family"] == gf.TMA
    assert tma_wins["best_template_over_aten"] == pytest.approx(15 / 21)
    aten_wins = rows[(4096, 4096, 4096, "NN")]
    assert aten_wins["best_family"] == gf.ATEN and aten_wins["best_us"][gf.DECOMPOSE_K] is None
    assert aten_wins["best_template_over_aten"] == pytest.approx(1.02) and aten_wins["size"] == "large"
    fp32 = rows[(64, 16384, 64, "NN")]
    assert (fp32["dtype"], fp32["size"], fp32["best_family"]) == ("float32+tf32", "small", gf.DECOMPOSE_K)
    assert fp32["best_us"][gf.OTHER] == pytest.approx(60.0)
    assert rows[(128, 4096, 4096, "NT")]["best_family"] == gf.TRITON


def test_family_counts_ratios_and_ceilings(log):
    fams = by_family(gf.report([log], margin=0.02))
    assert [f for f in fams] == [gf.TRITON, gf.TMA, gf.DECOMPOSE_K, "mm_foo", gf.ANY]
    triton, tma, dk, other, any_ = (fams[f] for f in fams)
    assert (triton["offered"], triton["beats_aten"]) == (4, 1)  # 0.99 is within the 2% margin
    assert triton["median_ratio"] == pytest.approx((0.99 + 1.1) / 2)
    assert triton["best_ratio"] == pytest.approx(0.96)
    assert (tma["offered"], tma["beats_aten"]) == (2, 1)
    assert tma["median_ratio"] == pytest.approx((15 / 21 + 1.02) / 2)
    assert tma["oracle_ceiling"] == pytest.approx((15 / 21) ** 0.25)  # over all 4 inputs
    assert (dk["offered"], dk["beats_aten"], dk["best_ratio"]) == (2, 1, pytest.approx(0.8))
    assert (other["offered"], other["beats_aten"], other["oracle_ceiling"]) == (1, 0, pytest.approx(1.0))
    assert (any_["offered"], any_["beats_aten"]) == (4, 3)
    assert any_["oracle_ceiling"] == pytest.approx((15 / 21 * 0.8 * 0.96) ** 0.25)
    assert by_family(gf.report([log], margin=0.0))[gf.TRITON]["beats_aten"] == 2


def test_groups_by_dtype_and_size(log):
    groups = {g["group"]: g for g in gf.report([log])["groups"]}
    assert list(groups) == ["dtype bfloat16", "dtype float32+tf32", "size small", "size medium", "size large"]
    assert groups["dtype bfloat16"]["inputs"] == 3 and groups["dtype bfloat16"]["beats_aten"] == 2
    assert groups["size medium"]["ceilings"][gf.TMA] == pytest.approx((15 / 21) ** 0.5)
    assert groups["size large"]["ceilings"][gf.ANY] == pytest.approx(1.0)
    assert groups["dtype float32+tf32"]["ceilings"][gf.DECOMPOSE_K] == pytest.approx(0.8)


def test_pooling_two_logs_takes_the_median_over_both(tmp_path, log):
    second = write_log(tmp_path / "again.txt", inputs=[(*INPUTS[1][:5], {ATEN: (0.330, 0.330)})])
    rows = {(r["m"], r["layout"]): r for r in gf.report([log, second])["inputs"]}
    assert len(rows) == 4 and rows[(4096, "NN")]["aten_us"] == pytest.approx(315.0)  # median of 4 reps
    assert rows[(4096, "NN")]["best_family"] == gf.TMA


def test_per_call_log_is_refused_unless_allowed(tmp_path, capsys):
    per_call = write_log(tmp_path / "per_call.txt", MM_LOG_METADATA)
    assert gf.main([per_call]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m torchgen_ah.evaluation.studies.gemm_families: error: ") and per_call in err and "cudagraph_replay" in err
    assert gf.main([per_call, "--allow-per-call"]) == 0
    assert "timing: per_call" in capsys.readouterr().out


def test_mixed_timing_logs_are_refused(tmp_path, log):
    per_call = write_log(tmp_path / "per_call.txt", MM_LOG_METADATA)
    with pytest.raises(ValueError, match="per_call.txt:1: metadata differs .* timing"):
        gf.report([log, per_call], allow_per_call=True)


def test_missing_log_names_the_file(tmp_path, capsys):
    missing = str(tmp_path / "nope.txt")
    assert gf.main([missing]) == 2
    assert f"python -m torchgen_ah.evaluation.studies.gemm_families: error: {missing}" in capsys.readouterr().err


def test_cli_prints_tables_and_writes_json_and_results_section(tmp_path, log, capsys):
    results, out_json = tmp_path / "RESULTS.md", tmp_path / "out.json"
    results.write_text("# Benchmark results\n\n<!-- BEGIN other -->\nkept\n<!-- END other -->\n")
    for _ in range(2):  # a second run replaces the section
        assert gf.main([log, "--results", str(results), "--json", str(out_json), "--rows", "2"]) == 0
    out = capsys.readouterr().out
    assert "| persistent TMA | 2 | 1 | 0.867 | 0.714 | 0.919 |" in out
    assert "Per input (2 of 4 inputs" in out
    text = results.read_text()
    assert text.count("<!-- BEGIN gemm_families -->") == 1 and "kept" in text
    section = text.split("<!-- BEGIN gemm_families -->")[1].split("<!-- END gemm_families -->")[0]
    assert section.lstrip().startswith(gf.TITLE) and "| any template | 4 | 3 |" in section
    data = json.loads(out_json.read_text())
    assert len(data["inputs"]) == 4 and data["timing"] == "cudagraph_replay"


def test_bad_margin_is_refused(log, capsys):
    assert gf.main([log, "--margin", "1.5"]) == 2
    assert "--margin" in capsys.readouterr().err
