"""torchgen_ah.model_gemms: the GEMMs of a model's real training and inference steps (meta device, real
autograd), written as a ``--shapes`` file that gen_data_mm reads back unchanged."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchgen_ah.datagen import model_gemms
from torchgen_ah.datagen.model_gemms import Gemm
from torchgen_ah.datagen.shape_sampler import MMInput, read_shapes_file

ROOT = Path(__file__).resolve().parents[1]


def test_a_linear_layers_step_gives_its_forward_and_both_gradient_gemms():
    m, k, n = 48, 64, 80
    layer = torch.nn.Linear(k, n, device="meta", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="meta", dtype=torch.bfloat16, requires_grad=True)
    rec = model_gemms.recorder()
    with rec:
        layer(x).float().sum().backward()
    assert dict(rec.counts) == {
        Gemm(MMInput(m, k, n, False, True, "bfloat16"), "addmm"): 1,  # x @ W.T, the bias fused
        Gemm(MMInput(m, n, k, False, False, "bfloat16"), "mm"): 1,  # dX = dY @ W
        Gemm(MMInput(n, m, k, True, False, "bfloat16"), "mm"): 1,  # dW = dY.T @ x
    }
    with model_gemms.recorder() as rec, torch.no_grad():  # inference: the forward only
        layer(x)
    assert list(rec.counts) == [Gemm(MMInput(m, k, n, False, True, "bfloat16"), "addmm")]


def test_what_is_not_an_mm_input_and_layouts_that_are_not_transposes():
    a = torch.randn(4, 8, device="meta", dtype=torch.float64)
    assert model_gemms.gemm_of("mm", a, a.t()) is None  # a dtype the dataset does not hold
    row = torch.randn(1, 8, device="meta")
    assert model_gemms.gemm_of("mm", row, torch.randn(8, 3, device="meta")) is None  # M=1: never autotuned
    with model_gemms.recorder() as rec:
        torch.bmm(torch.randn(2, 4, 8, device="meta"), torch.randn(2, 8, 3, device="meta"))  # batched
        torch.randn(4, 8, device="meta") @ torch.randn(8, 3, device="meta")
        torch.randn(4, 8, device="meta") @ torch.randn(8, 1, device="meta").expand(8, 3)  # stride (1, 0)
        torch.randn(8, 4, device="meta").t() @ torch.randn(3, 8, device="meta").t()  # both transposed
    assert dict(rec.counts) == {Gemm(MMInput(4, 8, 3, False, False, "float32"), "mm"): 2,
                                Gemm(MMInput(4, 8, 3, True, True, "float32"), "mm"): 1}


def test_training_on_a_real_device_runs_under_autocast():
    spec = {"suite": "torch", "model": "encoder2", "mode": "train", "batch": 2, "seq": 16}
    on_cpu = model_gemms.case_gemms(spec, "cpu")  # fp32 weights; autocast makes the GEMMs bf16
    on_meta = model_gemms.case_gemms(spec, "meta")  # bf16 weights instead
    assert {g.input.dtype for g in on_cpu} == {"bfloat16"}
    assert {g.input for g in on_cpu} == {g.input for g in on_meta}


def test_cli_writes_a_shapes_file_that_gen_data_mm_reads_unchanged(tmp_path):
    prefix = tmp_path / "out" / "cpu"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.model_gemms", "-o", str(prefix), "--suites", "torch",
                           "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    train, infer = (Path(model_gemms.output_path(str(prefix), "torch", mode)) for mode in ("train", "infer"))
    rows = list(csv.DictReader(train.open()))
    assert list(rows[0]) == list(model_gemms.COLUMNS)
    shapes = [tuple(r[c] for c in model_gemms.COLUMNS[:7]) for r in rows]
    assert len(shapes) == len(set(shapes))  # one row per GEMM, even when both mm and addmm called it
    assert {r["op"] for r in rows} <= {"mm", "addmm", "addmm+mm"}
    counts = [int(r["count"]) for r in rows]
    assert counts == sorted(counts, reverse=True) and all(1 <= int(r["cases"]) <= 4 for r in rows)
    layouts = {(r["transpose_left"], r["transpose_right"]) for r in rows}
    assert {("0", "1"), ("0", "0"), ("1", "0")} <= layouts  # forward, dX and dW of the linear layers
    infer_rows = list(csv.DictReader(infer.open()))
    assert {(r["transpose_left"], r["transpose_right"]) for r in infer_rows} == {("0", "1")}
    # every inference GEMM (batch 8, seq 64: 512 tokens, d=256) is also one of training's forward GEMMs
    assert {(r["m"], r["k"], r["n"]) for r in infer_rows} <= {(r["m"], r["k"], r["n"]) for r in rows}
    assert ("512", "256", "1024") in {(r["m"], r["k"], r["n"]) for r in infer_rows}
    assert f"{train}: {len(rows)} distinct GEMMs" in proc.stdout

    inputs = read_shapes_file(str(train))  # the file names every layout and dtype: no expansion
    assert len(inputs) == len(rows)
    assert inputs[0] == MMInput(int(rows[0]["m"]), int(rows[0]["k"]), int(rows[0]["n"]),
                                rows[0]["transpose_left"] == "1", rows[0]["transpose_right"] == "1", "bfloat16")
    from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM

    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", str(tmp_path / "h200_torch_train_mm.txt"), "--shapes", str(train)])
    assert runner.total_inputs(args) == len(rows)
    assert runner.make_input(len(rows) - 1, args) == inputs[-1].to_dict()


@pytest.mark.skipif(importlib.util.find_spec("timm") is not None, reason="timm is installed: no failing case")
def test_a_suite_that_cannot_run_is_reported_and_the_others_still_written(tmp_path):
    prefix = tmp_path / "mixed"
    said = []
    result = model_gemms.run(str(prefix), ("torch", "timm"), ("infer",), devices=("no_such_device", "meta"),
                             progress=False, log=said.append)
    timm_file = model_gemms.output_path(str(prefix), "timm", "infer")
    assert result[timm_file]["cases"] == 0 and result[timm_file]["failed"]
    assert "ModuleNotFoundError" in result[timm_file]["failed"][0]
    assert not Path(timm_file).exists()
    torch_run = result[model_gemms.output_path(str(prefix), "torch", "infer")]
    assert torch_run["cases"] == 4 and torch_run["devices"] == {"meta": 4}  # the first device fails
    assert any("ran on meta (no_such_device:" in line for line in said)
    assert any("failed and is skipped" in line for line in said)
    assert model_gemms.main(["-o", str(prefix), "--suites", "bogus"]) == 2


def test_decode_cases_come_after_the_others_and_have_m_equal_to_the_batch():
    """Mode "decode" (causal LMs, one new token per sequence) appends cases, so the whole-model runs'
    journals, which index cases, stay valid; its GEMMs are the small-M ones serving meets."""
    from torchgen_ah.datagen.model_shapes import DECODE_MODELS, all_cases

    before = all_cases(("timm", "hf"), ("train", "infer"))
    after = all_cases(("timm", "hf"), ("train", "infer", "decode"))
    assert after[: len(before)] == before and len(after) > len(before)
    decode = after[len(before):]
    assert {c["suite"] for c in decode} == {"hf"} and {c["seq"] for c in decode} == {1}
    assert {c["model"] for c in decode} == set(DECODE_MODELS) and min(c["batch"] for c in decode) >= 2
    assert all_cases(("timm",), ("decode",)) == []
    assert all_cases(("timm", "hf"), ("decode", "train", "infer")) == after  # decode last, whatever the order
    with pytest.raises(ValueError, match="unknown mode 'serve'"):
        all_cases(("hf",), ("serve",))

    for batch in (4, 16):
        spec = {"suite": "torch", "model": "encoder2", "mode": "decode", "batch": batch, "seq": 1}
        gemms = model_gemms.case_gemms(spec, "meta")
        assert gemms and {g.input.m for g in gemms} == {batch}  # every linear layer sees M = batch
        assert {g.input.dtype for g in gemms} == {"bfloat16"}


def test_cli_rejects_an_unknown_mode(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.model_gemms", "-o", str(tmp_path / "x"), "--suites",
                           "torch", "--modes", "train,serve", "--no-progress"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "serve" in proc.stderr
    assert not list(tmp_path.iterdir())
