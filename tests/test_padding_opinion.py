"""Fast mode's shape-padding opinion: the operands as the pad_mm pass would pad them (real tensors), and the
packaged H200 ranking's answer on the unaligned GEMMs whose padded and unpadded timings are in
benchmarks/RESULTS.md ``pad_decision`` (the real policy and artifact; the pass itself runs only on a GPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ah_plugin.collect import features  # noqa: E402
from ah_plugin.inductor.patches import pad_mm  # noqa: E402
from ah_plugin.inductor.patches.pad_mm import padded_descriptions  # noqa: E402
from ah_plugin.policy import AutotuneRequest  # noqa: E402
from ah_plugin.use.ranking import RULES_VERSION, RankingPolicy, UseOptions  # noqa: E402

H200 = {"device_capa": (9, 0), "shared_memory": 232448, "device_name": "NVIDIA H200"}


def _request(tensors: list[dict], op: str = "mm") -> AutotuneRequest:
    values, num, cat = features.op_features(op, tensors)
    meta = features.metadata(op, num, cat, H200["device_capa"], H200["shared_memory"], H200["device_name"])
    return AutotuneRequest(op, features.ordered_features(values, num, cat), meta, [], "padding", tensors)


def _pair(m, k, n, dtype=torch.bfloat16, bias=False):
    a, b = torch.zeros(m, k, dtype=dtype), torch.zeros(k, n, dtype=dtype)
    op = torch.ops.aten.addmm if bias else torch.ops.aten.mm
    return padded_descriptions(op, a, b, torch.zeros(n, dtype=dtype) if bias else None)


def _opinion(policy, m, k, n):
    unpadded, padded = _pair(m, k, n)
    return policy.padding_opinion(_request(unpadded), _request(padded))


def test_operands_are_padded_to_their_dtypes_alignment_row_major():
    unpadded, padded = _pair(128, 768, 2)
    assert [t["size"] for t in unpadded] == [[128, 768], [768, 2]]
    assert [(t["size"], t["stride"]) for t in padded] == [([128, 768], [768, 1]), ([768, 8], [8, 1])]
    _, padded = _pair(13, 1001, 4099)  # every dimension up to 8 elements (bf16)
    assert [t["size"] for t in padded] == [[16, 1008], [1008, 4104]]
    _, padded = _pair(5, 6, 7, dtype=torch.float32)  # fp32 aligns at 4
    assert [t["size"] for t in padded] == [[8, 8], [8, 8]]
    _, padded = _pair(128, 768, 2, bias=True)  # addmm: the bias first, padded along n
    assert [t["size"] for t in padded] == [[8], [128, 768], [768, 8]]


@pytest.mark.parametrize("bias_shape, expand, padded", [
    ((1,), False, ([1], [1])),  # a dimension of size 1 broadcasts: the pass leaves it
    ((1, 2), False, ([1, 8], [8, 1])),
    ((13, 1), False, ([16, 1], [1, 1])),
    ((13, 2), True, ([16, 8], [8, 1])),  # an expanded (stride-0) bias comes out of the padding row-major
])
def test_a_bias_is_padded_only_where_it_does_not_broadcast(bias_shape, expand, padded):
    a, b = torch.zeros(13, 768, dtype=torch.bfloat16), torch.zeros(768, 2, dtype=torch.bfloat16)
    bias = torch.zeros(2, dtype=torch.bfloat16).expand(13, 2) if expand else torch.zeros(*bias_shape, dtype=torch.bfloat16)
    _, out = padded_descriptions(torch.ops.aten.addmm, a, b, bias)
    assert (out[0]["size"], out[0]["stride"]) == padded


def test_symbolic_sizes_are_not_described_and_add_no_guard():
    """``int()`` of a symbolic size would specialize the user's dynamic graph on today's value."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    with FakeTensorMode(shape_env=env):
        a = torch.empty(env.create_unbacked_symint(), 768, dtype=torch.bfloat16)
        b = torch.empty(768, 2, dtype=torch.bfloat16)
        assert padded_descriptions(torch.ops.aten.mm, a, b) is None
        assert pad_mm.padding_request(torch.ops.aten.mm, a, b) is None
    assert not env.guards


def test_no_opinion_unless_the_compile_can_run_a_template():
    """Plain torch.compile (no max-autotune), an aten-only GEMM backend, or a user's force_shape_pad: the
    pass decides, since leaving the GEMM unpadded would leave it on cuBLAS's slow path."""
    import torch._inductor.config as inductor_config

    assert not pad_mm._templates_possible()
    with inductor_config.patch(max_autotune_gemm=True, max_autotune_gemm_backends="ATEN,TRITON"):
        assert pad_mm._templates_possible()
        with inductor_config.patch(force_shape_pad=True):
            assert not pad_mm._templates_possible()
    with inductor_config.patch(max_autotune=True, max_autotune_gemm_backends="ATEN"):
        assert not pad_mm._templates_possible()


def test_nothing_to_pad_and_batched_products_have_no_padded_twin():
    assert _pair(128, 768, 8) is None
    a, b = torch.zeros(4, 97, 511, dtype=torch.bfloat16), torch.zeros(4, 511, 97, dtype=torch.bfloat16)
    assert padded_descriptions(torch.ops.aten.bmm, a, b) is None


def test_fast_mode_leaves_unpadded_where_a_template_is_ranked_first_either_way():
    """128x768x2: cuBLAS 6.6 us as it is and padded at run time, the template 3.7-4.3 us unpadded; the pass's
    1.1x rule sits at the edge there and flipped between runs. 4097x4097x511 and 2048x768x1001 keep the
    pass's benchmark: on their padded twins cuBLAS is ranked first, and padding wins there (87.7 against
    126.5 us; 13.1 against 39.4)."""
    policy = RankingPolicy(options=UseOptions(enabled=True, fast=True))
    for shape in ((128, 768, 2), (64, 768, 2), (4096, 768, 4), (2048, 257, 768)):
        assert _opinion(policy, *shape) is False, shape
    for shape in ((4097, 4097, 511), (2048, 768, 1001), (512, 4096, 6)):
        assert _opinion(policy, *shape) is None, shape
    # ranked with no confidence, and padding beats the template there (13.9 against 17.3 us)
    assert _opinion(policy, 1024, 1000, 999) is None
    assert policy.stats.unpadded == 4


def test_only_fast_mode_has_an_opinion_and_it_is_part_of_the_cache_key():
    top_k = RankingPolicy(options=UseOptions(enabled=True, fast=False, top_k=10))
    assert _opinion(top_k, 128, 768, 2) is None
    off = RankingPolicy(options=UseOptions(enabled=False, fast=True))
    assert _opinion(off, 128, 768, 2) is None
    assert RULES_VERSION >= 5 and RankingPolicy().cache_key() == f"rules={RULES_VERSION}"
