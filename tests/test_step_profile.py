"""The step profile's arithmetic on plain data: kernel names grouped as the GPU's profiler names them, per-step
times and counts, the roofline, weights a step streams, and the report (``--combine`` of rows files)."""

from __future__ import annotations

import json

import pytest

from torchgen_ah.evaluation.studies import kernel_groups, roofline, step_profile

# names as torch.profiler reports them on an H200 (cuBLAS, CUTLASS, flash and memory-efficient attention, aten)
# and as Inductor names its Triton kernels
NAMES = {
    "nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNN": "gemm",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas": "gemm",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)": "gemm",
    "void splitKreduce_kernel<32, 16, int, __nv_bfloat16, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(cublasSplitKParams<float>)": "gemm",
    "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(...)": "gemm",
    "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64": "gemm",
    "triton_tem_fused_addmm_0": "gemm",
    "triton_mm": "gemm",  # a template the plugin compiled once: the benchmark module's kernel name
    "triton_for_fused_0": "pointwise",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)": "attention",
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)": "attention",
    "triton_per_fused__softmax_add_4": "attention",
    "triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_2": "norm",
    "triton_per_fused_native_layer_norm_3": "norm",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, ...)": "norm",
    "triton_poi_fused_addmm_gelu_1": "pointwise",  # the bias add of an extern addmm, fused with the GELU
    "triton_poi_fused_embedding_0": "pointwise",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>>(int, ...)": "pointwise",
    "triton_red_fused_sum_5": "other",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)": "other",
    "Memcpy DtoD (Device -> Device)": "other",
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_kernel_names_fall_into_their_groups(name):
    assert kernel_groups.classify(name) == NAMES[name]


def test_groups_are_per_step_and_the_largest_kernels_named():
    kernels = [("nvjet_a", 30.0), ("nvjet_a", 30.0), ("triton_poi_fused_add_0", 2.0), ("flash_fwd_kernel", 8.0),
               ("nvjet_b", 10.0), ("triton_poi_fused_add_0", 2.0)] * 2  # two steps' worth
    groups = kernel_groups.group_kernels(kernels, steps=2)
    assert set(groups) == set(kernel_groups.GROUPS)
    assert groups["gemm"] == {"us": 70.0, "count": 3.0}
    assert groups["pointwise"] == {"us": 4.0, "count": 2.0} and groups["attention"] == {"us": 8.0, "count": 1.0}
    assert groups["norm"] == {"us": 0.0, "count": 0.0}
    top = kernel_groups.top_kernels(kernels, steps=2, top=2)
    assert top == [{"name": "nvjet_a", "group": "gemm", "us": 60.0, "count": 2.0},
                   {"name": "nvjet_b", "group": "gemm", "us": 10.0, "count": 1.0}]


def test_roofline_is_the_larger_of_streaming_the_weights_and_the_flops_at_peak():
    decode = roofline.roofline_us(450e6, 2 * 32 * 225e6)  # 450 MB of bf16 weights, 32 tokens
    assert decode["memory_us"] == pytest.approx(93.75) and decode["bound"] == "memory"
    prefill = roofline.roofline_us(450e6, 2 * 2048 * 225e6, hbm_tbps=4.8, peak_tflops=790)
    assert prefill["compute_us"] == pytest.approx(2 * 2048 * 225e6 / 790e12 * 1e6) and prefill["bound"] == "compute"
    assert prefill["bound_us"] == prefill["compute_us"]


def test_streamed_weights_leave_out_embedding_tables_unless_a_head_is_tied_to_one():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    def model(tied: bool):
        embed, head = nn.Embedding(100, 8), nn.Linear(8, 100, bias=False)
        if tied:
            head.weight = embed.weight
        return nn.Sequential(embed, nn.Linear(8, 8), head)

    linear = (8 * 8 + 8) * 4
    assert roofline.streamed_weight_bytes(torch, model(tied=False)) == linear + 100 * 8 * 4  # the head, not the table
    assert roofline.streamed_weight_bytes(torch, model(tied=True)) == linear + 100 * 8 * 4  # the shared one, once
    flops = roofline.step_flops(torch, nn.Linear(8, 4), (torch.randn(3, 8),))
    assert flops == 2 * 3 * 8 * 4


def _profile_row(model, phase, step_us, gemm_us, weight_bytes, flops):
    groups = {g: {"us": 0.0, "count": 0.0} for g in kernel_groups.GROUPS}
    groups["gemm"] = {"us": gemm_us, "count": 63.0}
    groups["pointwise"] = {"us": 33.0, "count": 26.0}
    return {"model": model, "family": "decoder", "phase": phase, "batch": 32, "step_us": step_us,
            "timing": "CUDA-graph replay", "steps": 10, "groups": groups,
            "top": [{"name": "nvjet_tst_64x8", "group": "gemm", "us": 40.0, "count": 7.0}],
            "weight_bytes": weight_bytes, "flops": flops}


def test_attention_flops_count_grouped_query_attention():
    """Qwen2- and Mixtral-style attention (8 query heads sharing 2 key/value heads): torch's own formula
    refuses the shapes; ours counts the scores and the weighted sum per query head, and on the fused op the
    counter goes through it."""
    torch = pytest.importorskip("torch")
    q, kv = (2, 8, 16, 64), (2, 2, 16, 64)
    assert roofline.attention_flops(q, kv, kv) == 2 * (2 * 2 * 8 * 16 * 16 * 64)
    assert roofline.attention_flops(q, q, q) == roofline.attention_flops(q, kv, kv)  # heads shared, work not

    class Gqa(torch.nn.Module):  # what sdpa(enable_gqa=True) calls on a GPU: the flash op, heads unequal
        def forward(self, query, key, value):
            return torch.ops.aten._scaled_dot_product_flash_attention(query, key, value)[0]

    shapes = [torch.randn(*shape, device="meta", dtype=torch.bfloat16) for shape in (q, kv, kv)]
    assert torch.ops.aten._scaled_dot_product_flash_attention in roofline._attention_ops(torch)
    assert roofline.step_flops(torch, Gqa(), shapes) == roofline.attention_flops(q, kv, kv)

    class CpuGqa(torch.nn.Module):  # the same call on a CPU tensor goes to the CPU's fused op
        def forward(self, query, key, value):
            return torch.nn.functional.scaled_dot_product_attention(query, key, value, enable_gqa=True)

    if "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__ or ""):
        cpu = [torch.randn(*shape) for shape in (q, kv, kv)]
        assert roofline.step_flops(torch, CpuGqa(), cpu) == roofline.attention_flops(q, kv, kv)


def test_report_from_rows_files(tmp_path):
    rows = tmp_path / "a.jsonl"
    rows.write_text(json.dumps(_profile_row("qwen2_decode", "decode", 427.0, 334.0, 450e6, 2 * 32 * 225e6)) + "\n"
                    + json.dumps({"model": "t5", "skipped": "ImportError: transformers"}) + "\n")
    results_md = tmp_path / "RESULTS.md"
    assert step_profile.main(["--combine", str(rows), "--out", str(tmp_path / "out"), "--results", str(results_md)]) == 0
    text = (tmp_path / "out" / "step_profile.md").read_text()
    # step 427 us; kernels 334 + 33 = 367 us, 89 per step; GEMM 334/427 = 78%; roofline 94 us (memory), 4.6x
    assert "| qwen2_decode | decode | 32 | 427 | 367 | 89 | 78% (63) | - | - | 8% (26) | - | 450 | 14.4 | 94 (memory) | 4.6x |" in text
    assert "- qwen2_decode: nvjet_tst_64x8 (gemm, 40 us in 7)" in text
    assert "Not profiled: t5 (ImportError: transformers)." in text
    assert "<!-- BEGIN step_profile -->" in results_md.read_text()


def test_the_profile_refuses_a_machine_without_a_gpu_and_unknown_models(capsys):
    torch = pytest.importorskip("torch")
    assert step_profile.main(["--models", "nope", "--out", "unused"]) == 2
    if not torch.cuda.is_available():
        assert step_profile.main(["--models", "llama_decode", "--out", "unused", "--device", "cpu"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
