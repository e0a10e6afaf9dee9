"""The compiled result's check against eager PyTorch's in the single-GEMM benchmark (result_check)."""

import pytest
import torch

from torchgen_ah.evaluation import kernel_times
from torchgen_ah.evaluation.result_check import WRONG_ABOVE, relative_error, report_lines


def test_rounding_reads_small_and_a_wrong_tile_reads_large_at_any_magnitude():
    torch.manual_seed(0)
    a, b = torch.randn(64, 256), torch.randn(256, 48)
    eager = a @ b
    for scale in (1e-3, 1.0, 1e3):
        rounded = (a.bfloat16() @ b.bfloat16()).float() * scale
        assert relative_error(rounded, eager * scale) < 1e-2
        wrong = eager.clone() * scale
        wrong[:16, :16] = 0  # one tile never written
        assert relative_error(wrong, eager * scale) > WRONG_ABOVE


def test_results_of_several_tensors_are_compared_pairwise_and_mismatches_are_not_compared():
    x = torch.ones(3, 3)
    assert relative_error((x, x * 2), (x, x * 2)) == 0.0
    assert relative_error([x, x * 3], [x, x * 2]) == pytest.approx(0.5)
    assert relative_error(x, torch.ones(3, 4)) is None  # shapes differ
    assert relative_error((x,), (x, x)) is None  # the results do not pair up
    assert relative_error(None, x) is None
    assert relative_error(torch.empty(0, 3), torch.empty(0, 3)) == 0.0


def test_the_report_names_every_wrong_result_and_the_largest_error():
    line = {"op": "mm", "seconds": 1.0}
    results = [{**line, "mode": "off", "shape": "mm a", "result_error": 1e-3},
               {**line, "mode": "quality", "shape": "mm a", "result_error": 0.5},
               {**line, "mode": "fast", "shape": "mm b", "result_error": None}]
    text = "\n".join(report_lines(results))
    assert "(2 compiles)" in text and "largest relative error 5.0e-01 (quality, mm a)" in text
    assert "**1 wrong**" in text and "quality mm a (0.5)" in text
    assert "none above" in "\n".join(report_lines(results[:1]))
    assert report_lines([{**line, "mode": "off", "shape": "mm a"}]) == []  # older lines: nothing said
    assert "**1 wrong**" in kernel_times.markdown(results)  # the benchmark's report carries it
