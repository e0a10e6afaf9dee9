"""The mm shape sampler: upstream's distribution within tolerance, constraints always, determinism."""

import collections
import math

import pytest

from torchgen_ah.datagen import shape_sampler as ss


def test_dimension_kinds_follow_upstream_weights():
    rng = ss.sample_rng(0, 0, stream="test-kinds")
    draws = 40_000
    counts = collections.Counter(ss.draw_dim_kind(rng) for _ in range(draws))
    for kind, weight in zip(ss.DIM_KINDS, ss.DIM_KIND_WEIGHTS):
        sd = math.sqrt(weight * (1 - weight) / draws)
        assert abs(counts[kind] / draws - weight) < 5 * sd, (kind, counts[kind] / draws, weight)


@pytest.mark.parametrize("kind", ss.DIM_KINDS)
def test_each_kind_stays_in_its_range(kind):
    rng = ss.sample_rng(1, 2, stream=kind)
    values = [ss.draw_dim(rng, kind) for _ in range(5000)]
    if kind == "mult_128":
        assert all(v % 128 == 0 and 2**10 <= v <= 2**17 for v in values)
        # power ranges 2^10..2^17 are each hit (p uniform in 10..16)
        assert {v.bit_length() - 1 for v in values} >= set(range(10, 17))
    elif kind == "pow2":
        assert all(v & (v - 1) == 0 and 1 <= v <= 2**17 for v in values)
        assert len(set(values)) == 18
    elif kind == "uniform":
        assert all(1 <= v <= 2**17 for v in values)
        assert sum(v % 128 != 0 for v in values) > 0.95 * len(values)
        mean = sum(values) / len(values)
        assert abs(mean - 2**16) < 0.05 * 2**17
    else:
        assert all(2 <= v <= 2**17 for v in values)
        # p uniform in 1..16, so small ranges ([2, 4], [4, 8]) often give a power of two: ~90% are not
        assert sum(v & (v - 1) != 0 for v in values) > 0.85 * len(values)
        assert {(v - 1).bit_length() - 1 for v in values if v > 2} >= set(range(1, 17))


def test_samples_are_deterministic_and_seed_dependent():
    first = [ss.sample_mm_input(7, i) for i in range(200)]
    again = [ss.sample_mm_input(7, i) for i in range(200)]
    other = [ss.sample_mm_input(8, i) for i in range(200)]
    assert first == again
    assert sum(a != b for a, b in zip(first, other)) > 190
    # order of evaluation must not matter (sample i is a pure function of (seed, i))
    assert [ss.sample_mm_input(7, i) for i in reversed(range(200))] == list(reversed(first))


def test_constraints_hold_and_dtypes_layouts_are_balanced():
    n = 3000
    samples = [ss.sample_mm_input(3, i) for i in range(n)]
    for s in samples:
        assert s.m * s.k < 2**31 and s.m * s.n < 2**31 and s.k * s.n < 2**31
        assert (s.m * s.k + s.k * s.n + s.m * s.n) * ss.DTYPE_BYTES[s.dtype] <= ss.DEFAULT_MEMORY_LIMIT_BYTES
        assert 1 <= min(s.m, s.k, s.n) and max(s.m, s.k, s.n) <= 2**17
        if s.dtype != "float32":
            assert not s.allow_tf32
    dtypes = collections.Counter(s.dtype for s in samples)
    for d in ss.DTYPES:
        assert abs(dtypes[d] / n - 1 / 3) < 0.04, dtypes
    fp32 = [s for s in samples if s.dtype == "float32"]
    assert abs(sum(s.allow_tf32 for s in fp32) / len(fp32) - 0.5) < 0.07
    layouts = collections.Counter((s.transpose_left, s.transpose_right) for s in samples)
    assert len(layouts) == 4 and all(abs(c / n - 0.25) < 0.04 for c in layouts.values()), layouts
    # most dimensions are multiples of 128 (85% drawn so, plus large powers of two)
    dims = [d for s in samples for d in (s.m, s.k, s.n)]
    assert 0.80 < sum(d % 128 == 0 for d in dims) / len(dims) < 0.97


def test_memory_limit_is_enforced():
    limit = 64 * 2**20  # 64 MiB
    for i in range(300):
        s = ss.sample_mm_input(5, i, memory_limit_bytes=limit)
        assert (s.m * s.k + s.k * s.n + s.m * s.n) * ss.DTYPE_BYTES[s.dtype] <= limit
    assert not ss.fits(2**16, 2**16, 1, "bfloat16")  # m*k = 2^32 elements


def test_input_round_trips_and_rejects_bad_values():
    s = ss.sample_mm_input(0, 11)
    assert ss.MMInput.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="dtype"):
        ss.MMInput(1, 2, 3, False, False, "int4")
    with pytest.raises(ValueError, match="m of at least 17"):
        ss.MMInput(16, 32, 32, False, True, "int8")
    with pytest.raises(ValueError, match="multiples of 8"):
        ss.MMInput(32, 30, 32, False, True, "int8")
    with pytest.raises(ValueError, match="layout NT"):
        ss.MMInput(32, 32, 32, False, False, "int8")
    with pytest.raises(ValueError, match="positive"):
        ss.MMInput(0, 2, 3, False, False, "float16")


def test_shapes_file_expands_missing_columns(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text("# real model shapes\nm,k,n\n128,256,512\n\n")
    inputs = ss.read_shapes_file(path)
    # 4 layouts x (bf16, fp16, fp32 with and without tf32)
    assert len(inputs) == 16
    assert {(i.transpose_left, i.transpose_right) for i in inputs} == {(a, b) for a in (0, 1) for b in (0, 1)}
    full = tmp_path / "full.csv"
    full.write_text("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n4,5,6,true,0,fp32,1\n")
    assert ss.read_shapes_file(full) == [ss.MMInput(4, 5, 6, True, False, "float32", True)]


def test_shapes_file_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("m,k,n,dtype\n1,2,3,bf16\n1,x,3,bf16\n")
    with pytest.raises(ValueError, match=r"bad\.csv:3: "):
        ss.read_shapes_file(bad)
    nohdr = tmp_path / "nohdr.csv"
    nohdr.write_text("m,k\n1,2\n")
    with pytest.raises(ValueError, match=r"nohdr\.csv:1: .*'n'"):
        ss.read_shapes_file(nohdr)


def test_int8_samples_are_int8_gemms_and_never_drawn_by_default():
    samples = [ss.sample_mm_input(4, i, dtypes=(ss.INT8,)) for i in range(500)]
    for s in samples:  # MMInput checks the int8 GEMM's rules; here what the sampler adds on top
        assert s.op == "int_mm" and (s.transpose_left, s.transpose_right) == (False, True)
        assert s.m >= 17 and s.k % 8 == 0 and s.n % 8 == 0 and max(s.m, s.k, s.n) <= ss.MAX_DIM
        assert ss.fits(s.m, s.k, s.n, "int8")
    assert len({(s.m, s.k, s.n) for s in samples}) > 450  # still the upstream spread of sizes
    assert [ss.sample_mm_input(4, i, dtypes=(ss.INT8,)) for i in range(500)] == samples
    assert all(ss.sample_mm_input(4, i).op == "mm" for i in range(500))


def test_an_int8_row_of_a_shapes_file_gets_the_int8_layout_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / "shapes.csv"
    path.write_text("m,k,n,dtype\n32,4096,14336,int8\n")
    assert ss.read_shapes_file(path) == [ss.MMInput(32, 4096, 14336, False, True, "int8")]
    bad = tmp_path / "bad.csv"
    bad.write_text("m,k,n,dtype\n32,4096,14336,int8\n8,4096,14336,torch.int8\n")
    with pytest.raises(ValueError, match=r"bad\.csv:3: an int8 input .*m of at least 17"):
        ss.read_shapes_file(bad)
