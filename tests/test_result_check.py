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


def test_results_of_several_tensors_are_compared_pairwise():
    x = torch.ones(3, 3)
    assert relative_error((x, x * 2), (x, x * 2)) == 0.0
    assert relative_error([x, x * 3], [x, x * 2]) == pytest.approx(0.5)
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


def test_a_result_that_cannot_be_eagers_is_wrong_not_left_out():
    inf = float("inf")
    x = torch.ones(4, 4)
    nan = x.clone()
    nan[1, 2] = float("nan")
    assert relative_error(nan, x) == inf  # a NaN where eager's value is finite
    assert relative_error(x * inf, x) == inf
    assert relative_error(nan, nan) == 0.0  # the same non-finite values as eager: compared where finite
    assert relative_error(x, torch.ones(4, 5)) == inf  # another shape
    assert relative_error(x.double(), x) == inf  # another dtype
    assert relative_error((x,), (x, x)) == inf and relative_error([x, 3], [x, 4]) == inf
    assert relative_error(None, x) == inf and relative_error([x, None], [x, None]) == 0.0


def test_compiles_that_could_not_be_checked_are_counted():
    line = {"op": "mm", "seconds": 1.0, "shape": "mm a"}
    text = "\n".join(report_lines([{**line, "mode": "off", "result_error": 1e-3},
                                   {**line, "mode": "default", "result_error": None}]))
    assert "(1 compiles)" in text and "1 compiles could not be checked" in text
    assert "could not be checked" in "\n".join(report_lines([{**line, "mode": "off", "result_error": None}]))
