"""The generators of the ops beyond mm (FlexAttention, a mixture of experts' grouped GEMMs): their inputs, a
pure function of seed and index, real models' first; the workloads they compile; and their refusal, before
any worker starts, where no GPU is (the collection itself runs on the device machine: tests/test_flex_gpu.py,
tests/test_fast_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torchgen_ah.moe import gen_data_grouped_mm as grouped

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_grouped_inputs_start_with_real_models_and_are_a_pure_function_of_seed_and_index():
    first = [grouped.sample_call(0, i) for i in range(len(grouped.MODEL_CALLS) + 200)]
    assert first == [grouped.sample_call(0, i) for i in range(len(first))]
    assert first[len(grouped.MODEL_CALLS):] != [grouped.sample_call(1, i) for i in
                                                range(len(grouped.MODEL_CALLS), len(first))]
    mixtral_up = first[grouped.MODEL_CALLS.index(("mixtral-8x7b", "up", 4096))]
    # 4096 tokens, 2 experts each: 8192 routed rows into 8 experts' fused gate and up (4096 -> 2 x 14336)
    assert (mixtral_up["rows"], mixtral_up["experts"], mixtral_up["k"], mixtral_up["n"]) == (8192, 8, 4096, 28672)
    for spec in first:
        assert spec["rows"] % grouped.ROW_ALIGN == 0 and spec["rows"] >= grouped.ROW_ALIGN
        assert spec["rows"] * (spec["k"] + spec["n"]) + spec["experts"] * spec["k"] * spec["n"] \
            <= grouped.DEFAULT_MAX_ELEMENTS or spec["rows"] == grouped.ROW_ALIGN
    assert {s["model"] for s in first} == {name for name, *_ in grouped.MOE_LAYOUTS}


def test_a_grouped_input_builds_the_maps_grouped_gemm_whose_offsets_end_at_its_rows():
    torch = pytest.importorskip("torch")
    spec = grouped.sample_call(0, grouped.MODEL_CALLS.index(("olmoe-1b-7b", "down", 64)))
    work = grouped.workload(spec, "cpu")
    assert work.family == work.autotuned_as == "grouped_mm" and "olmoe-1b-7b down" in work.label
    _, (x, w, offs) = work.build()
    assert x.shape == (spec["rows"], spec["k"]) and w.shape == (spec["experts"], spec["k"], spec["n"])
    assert offs.dtype == torch.int32 and offs.shape == (spec["experts"],) and int(offs[-1]) == spec["rows"]
    assert bool((offs[1:] >= offs[:-1]).all())


def test_few_rows_per_expert_spread_over_several_experts_in_aligned_blocks():
    pytest.importorskip("torch")
    from torchgen_ah.evaluation.studies.autotune_families import _routed_offsets
    for tokens, experts in ((64, 64), (512, 64), (1024, 8), (8192, 8), (100, 8)):
        offs = _routed_offsets(tokens, experts)
        counts = [b - a for a, b in zip([0] + offs[:-1], offs)]
        assert len(offs) == experts and offs[-1] == tokens and min(counts) >= 0
        assert all(c % 16 == 0 for c in counts[:-1]), (tokens, experts, counts)
        # every 16-row block an expert of its own while there are fewer blocks than experts
        assert sum(1 for c in counts if c) >= min(experts, tokens // 16), (tokens, experts, counts)


@pytest.mark.parametrize("module, what", [("torchgen_ah.moe.gen_data_grouped_mm", "grouped GEMMs"),
                                          ("torchgen_ah.flex.gen_data_flex", "FlexAttention's configs")])
def test_without_a_gpu_a_generator_says_so_before_any_worker_starts(tmp_path, module, what):
    out = tmp_path / "rows.txt"
    proc = subprocess.run([sys.executable, "-m", module, "-o", str(out), "--device", "cpu", "--num-samples", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"needs a CUDA GPU: Inductor autotunes {what}" in proc.stderr, proc.stderr
    assert not any(tmp_path.iterdir())  # no log, journal or worker folder
