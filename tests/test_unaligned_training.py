"""Unaligned GEMMs in the H200 ranking: several logs trained as one, the alignment features, and fast
mode's held-out replay of the committed replay-timed logs (real files, the real trainer)."""

from __future__ import annotations

import gzip
import math
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ah_plugin.collect import features
from torchgen_ah.datagen.shape_sampler import MMInput
from torchgen_ah.evaluation.studies import fast_heldout
from torchgen_ah.mm import train_decision_mm as mm
from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM, mm_tensor_descriptions

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "datasets" / "h200_replay" / "h200_replay_mm.txt.gz"
UNALIGNED = ROOT / "datasets" / "h200_replay" / "h200_replay_unaligned_mm.txt.gz"
SHIPPED = ROOT / "artifacts" / "_MMRankingH200.py"


def _code(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]


def _shipped():
    spec = importlib.util.spec_from_file_location("_shipped_h200_for_test", SHIPPED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MMRankingH200()


def _features(m, k, n, dtype="bfloat16"):
    values, _, _ = features.op_features("mm", mm_tensor_descriptions(MMInput(m, k, n, False, False, dtype)))
    return values


def test_two_logs_train_exactly_as_their_merged_file(tmp_path):
    merged = tmp_path / "merged.txt.gz"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", str(merged), str(REPLAY), str(UNALIGNED)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    flags = ["--heuristic-name", "MMRankingH200", "--grid", "sparse", "--alignment-features"]
    mm.main([str(merged), *flags, "--out", str(tmp_path / "one")])
    mm.main([str(REPLAY), str(UNALIGNED), *flags, "--out", str(tmp_path / "two")])
    one, two = tmp_path / "one" / "_MMRankingH200.py", tmp_path / "two" / "_MMRankingH200.py"
    assert _code(one) == _code(two)
    assert "h200_replay_mm.txt.gz, h200_replay_unaligned_mm.txt.gz" in two.read_text()


def test_a_second_log_of_another_device_is_refused_naming_it(tmp_path):
    lines = gzip.decompress(UNALIGNED.read_bytes()).decode().splitlines(keepends=True)
    other = tmp_path / "a100_unaligned.txt"
    other.write_text(lines[0].replace('"device_capa": [9, 0]', '"device_capa": [8, 0]') + "".join(lines[1:]))
    with pytest.raises(ValueError, match=r"a100_unaligned.txt:1: metadata differs .*device_capa"):
        mm.load_table([str(REPLAY), str(other)], "x")


def test_alignment_features_match_between_trainer_and_shipped_artifact():
    """The artifact computes mat1_align / mat2_align in Python exactly as the trainer did with numpy."""
    artifact = _shipped()
    inputs = [(128, 768, 2), (128, 768, 8), (13, 1000, 4099), (1000, 1001, 1003), (2048, 4096, 4096)]
    rows = [_features(*shape) for shape in inputs]
    frame = pd.DataFrame(rows)
    for column in ("mat1_dtype", "mat2_dtype", "mat1_iscontig", "mat2_iscontig", "using_tf32"):
        frame[column] = frame[column].astype(str)
    spec = mm.mm_feature_spec({"numerical_features": artifact.numerical_features,
                               "categorical_features": artifact.categorical_features}, alignment=True)
    spec = spec.fit([frame])
    spec.categories = {k: list(v) for k, v in artifact.categories.items()}
    trained = spec.matrix(frame).astype(np.float32)
    names = spec.names()
    for i, row in enumerate(rows):
        assert np.array_equal(np.asarray(artifact._features(row), dtype=np.float32), trained[i])
    align2 = names.index("mat2_align")
    assert [float(v) for v in trained[:, align2]] == [2.0, 0.0, 3.0, 3.0, 0.0]  # n mod 8 of a row-major B
    assert float(trained[2, names.index("mat1_align")]) == 0.0 and float(trained[3, names.index("mat1_align")]) == 1.0


def test_shipped_h200_ranking_puts_a_template_first_on_an_unaligned_n_it_never_saw():
    """128x768x2 is not among the training inputs (its neighbours 64/256/512x768x2 are): cuBLAS takes 6.7 us
    there against a template's 4.3. A large aligned GEMM stays cuBLAS's."""
    artifact = _shipped()
    assert "mat2_align" in artifact.derived_features
    assert not artifact.rank(_features(128, 768, 2))[0][0].startswith("extern_")
    assert artifact.rank(_features(2048, 4096, 4096))[0][0] == "extern_mm"


def test_fast_mode_held_out_on_the_committed_logs(tmp_path):
    assert fast_heldout.main([str(REPLAY), str(UNALIGNED), "--alignment-features", "--out", str(tmp_path)]) == 0
    rows = fast_heldout.evaluate([str(REPLAY), str(UNALIGNED)], True, 0.02, log=lambda *_: None)
    assert len(rows) == 92 and sorted({r["fold"] for r in rows}) == [0, 1, 2, 3, 4]
    assert len({(r["input"], r["fold"]) for r in rows}) == 92  # labels carry the layout: no two alike
    # timed against aten with the margin: aten's own time or a faster template's
    assert all(r["us"] <= r["cublas_us"] for r in rows)
    # a sure template kept alone, untimed, is what a GPU must not do: some held-out ones lose to cuBLAS
    alone = fast_heldout.evaluate([str(REPLAY), str(UNALIGNED)], True, 0.02, log=lambda *_: None, confidence=0.8)
    slower = [r for r in alone if r["us"] > r["cublas_us"]]
    assert slower and all(r["kept"] == "template alone" for r in slower)
    # N of 2 or 4 columns, each held out: cuBLAS's slow unaligned path, 1.7-2.3x a template's time
    unaligned_n = [r for r in rows if r["input"].split()[0].endswith(("x2", "x4"))]
    assert len(unaligned_n) == 8 and all(r["kept"] == "template kept" for r in unaligned_n)
    assert all(r["us"] < 0.65 * r["cublas_us"] for r in unaligned_n)
    # --backed-only (AH_PLUGIN_TIME_UNBACKED=off): fewer templates timed, none above cuBLAS, fewer wins
    backed = fast_heldout.evaluate([str(REPLAY), str(UNALIGNED)], True, 0.02, log=lambda *_: None,
                                   time_unbacked=False)
    timed = {mode: sum(r["kept"] != "aten" for r in got) for mode, got in (("all", rows), ("backed", backed))}
    assert timed == {"all": 19, "backed": 8}  # the figures docs/use.md and RESULTS.md quote
    won = {mode: {r["input"] for r in got if r["kept"] == "template kept"} for mode, got in (("all", rows),
                                                                                            ("backed", backed))}
    assert won["backed"] < won["all"] and (len(won["all"]), len(won["backed"])) == (13, 5)
    ratios = [r["us"] / r["cublas_us"] for r in backed]
    assert round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3) == 0.969
    text = (tmp_path / "fast_heldout.md").read_text()
    assert text.startswith("Command: `python -m torchgen_ah.evaluation.studies.fast_heldout") and "92 inputs" in text


def test_fast_heldout_names_a_missing_log(tmp_path, capsys):
    missing = tmp_path / "nope.txt.gz"
    assert fast_heldout.main([str(missing)]) == 1
    assert str(missing) in capsys.readouterr().err


def test_shape_padding_option_defaults_to_auto_and_refuses_others():
    runner = BenchmarkRunnerMM()
    assert runner.parse_args(["-o", "x.txt"]).shape_padding == "auto"
    assert runner.parse_args(["-o", "x.txt", "--shape-padding", "off"]).shape_padding == "off"
    with pytest.raises(SystemExit):
        runner.parse_args(["-o", "x.txt", "--shape-padding", "never"])
