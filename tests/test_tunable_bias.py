"""The bias layout in addmm/baddbmm keys: distinct keys per layout, old rows, offline rebuild."""

from __future__ import annotations


import pytest
import torch

import ah_plugin.tunable as tunable
from ah_plugin.policy import AutotuneRequest
from ah_plugin.tunable import offline
from ah_plugin.tunable import params as P
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import settings as S

M, N, K = 24, 40, 16
MAT1 = {"size": [M, K], "stride": [K, 1], "dtype": "torch.float32"}
MAT2 = {"size": [K, N], "stride": [N, 1], "dtype": "torch.float32"}
BASE = f"NN_{M}_{N}_{K}_ld_{K}_{N}_float32"


def bias(size, stride):
    return {"size": size, "stride": stride, "dtype": "torch.float32"}


def addmm_request(bias_desc, candidates=("extern_addmm", "extern_bias_addmm", "type=triton_A")):
    return AutotuneRequest("addmm", {}, {}, list(candidates), tensors=[bias_desc, MAT1, MAT2])


@pytest.fixture
def env(tunable_env):
    return tunable_env


def test_bias_layouts_give_distinct_keys_and_broadcast_views_agree():
    layouts = {
        "R": [bias([N], [1]), bias([M, N], [0, 1]), bias([1, N], [N, 1])],  # 1-D, Inductor's expanded view, [1, N]
        "C": [bias([M, 1], [1, 1]), bias([M, N], [1, 0])],
        "S": [bias([], []), bias([M, N], [0, 0])],
        f"N{N}": [bias([M, N], [N, 1])],
        "N64": [bias([M, N], [64, 1])],  # a slice of a wider matrix
        f"T{M}": [bias([M, N], [1, M])],
    }
    keys = {}
    for code, descs in layouts.items():
        encoded = {P.from_request("addmm", {}, [d, MAT1, MAT2]).encode() for d in descs}
        assert encoded == {f"{BASE}_bias-{code}"}, (code, encoded)
        keys[code] = encoded.pop()
    assert len(set(keys.values())) == len(layouts)
    # the same GEMM without a bias (mm) has no bias part; baddbmm records the batch stride too
    assert P.from_request("mm", {}, [MAT1, MAT2]).encode() == BASE
    batched = [{"size": [3, *t["size"]], "stride": [M * K if t is MAT1 else K * N, *t["stride"]],
                "dtype": "torch.float32"} for t in (MAT1, MAT2)]
    shared = P.from_request("baddbmm", {}, [bias([N], [1]), *batched]).encode()
    full = P.from_request("baddbmm", {}, [bias([3, M, N], [M * N, N, 1]), *batched]).encode()
    assert (shared, full) == (f"B3_{BASE}_bias-R-b0", f"B3_{BASE}_bias-N{N}-b{M * N}")
    # the log's addmm columns (no tensors) carry the expanded bias strides: same key
    features = {"m": M, "n": N, "k": K, "mat1_stride_0": K, "mat1_stride_1": 1, "mat2_stride_0": N,
                "mat2_stride_1": 1, "mat1_dtype": "torch.float32", "mat2_dtype": "torch.float32",
                "bias_stride_0": 1, "bias_stride_1": 0}
    assert P.from_request("addmm", features, []).encode() == keys["C"]


def test_bias_in_params_round_trips_wildcards_and_rejects_misuse():
    key = P.parse_for("addmm", f"{BASE}_tf32_bias-N{N}")
    assert key.tf32 and key.bias == f"N{N}" and key.encode() == f"{BASE}_tf32_bias-N{N}"
    wide = key.widen("n")  # the bias's ld grows with N
    assert wide.encode() == f"NN_{M}_*_{K}_ld_{K}_*_float32_tf32_bias-N*"
    other_n = P.parse_for("addmm", f"NN_{M}_72_{K}_ld_{K}_72_float32_tf32_bias-N72")
    assert wide.matches(other_n)
    assert not wide.matches(P.parse_for("addmm", f"NN_{M}_72_{K}_ld_{K}_72_float32_tf32_bias-R"))
    for op, text in (("mm", f"{BASE}_bias-R"), ("addmm", f"{BASE}_bias-R-b0"), ("baddbmm", f"B2_{BASE}_bias-R"),
                     ("addmm", f"{BASE}_bias-Q")):
        with pytest.raises(P.ParamsError):
            P.parse_for(op, text)


def test_old_rows_without_bias_still_read(env, monkeypatch):
    validators = F.current_validators()
    path = env / "res0.csv"
    head = "".join(f"Validator,{k},{v}\n" for k, v in validators.items()).replace('"', "")
    path.write_text(head + f"addmm,{BASE},type=triton_A,0.5\n"  # old addmm row: read as a row-vector bias
                    f"baddbmm,B3_{BASE},Default,0.5\n"  # old baddbmm row: bias unknown, skipped
                    f"addmm,{BASE}_bias-N{N},extern_addmm,0.7\n")
    first_row = len(validators) + 1
    with pytest.warns(F.TunableFileWarning, match=rf"res0.csv:{first_row + 1}: baddbmm params .* no bias layout"):
        read = F.read_results(str(path), validators)
    assert set(read.entries) == {("addmm", f"{BASE}_bias-R"), ("addmm", f"{BASE}_bias-N{N}")}
    assert read.entries[("addmm", f"{BASE}_bias-R")].source.endswith(f":{first_row}")

    # through the cache: the nn.Linear-style bias hits the old row, a full bias its own row, a column bias misses
    monkeypatch.setenv(S.ENABLED, "1")
    policy = tunable.policy()
    with pytest.warns(F.TunableFileWarning, match="baddbmm params"):  # the store reads the file on first use
        assert policy.select(addmm_request(bias([N], [1]))) == ["type=triton_A"]
    assert policy.select(addmm_request(bias([M, N], [N, 1]))) == ["extern_addmm"]
    assert policy.select(addmm_request(bias([M, 1], [1, 1]))) is None  # a miss, tuning on
    assert tunable.get_stats()["hits"] == 2
    tunable.write_file()
    written = path.read_text()
    assert f"addmm,{BASE}_bias-R,type=triton_A" in written and f"addmm,{BASE}," not in written


@pytest.mark.parametrize("op, code, shape, strides", [
    ("addmm", "R", (N,), (1,)),
    ("addmm", "C", (M, 1), (1, 1)),
    ("addmm", "S", (), ()),
    ("addmm", f"N{N}", (M, N), (N, 1)),
    ("addmm", "N64", (M, N), (64, 1)),
    ("addmm", f"T{M}", (M, N), (1, M)),
    ("baddbmm", "R-b0", (N,), (1,)),
    ("baddbmm", f"N{N}-b0", (M, N), (N, 1)),
    ("baddbmm", f"N{N}-b{M * N}", (3, M, N), (M * N, N, 1)),
])
def test_offline_rebuild_gives_the_recorded_bias_layout(op, code, shape, strides):
    text = f"{'B3_' if op == 'baddbmm' else ''}{BASE}_bias-{code}"
    key = P.parse_for(op, text)
    fn, inputs, reference = offline.rebuild(op, key, "cpu")
    rebuilt = inputs[0]
    assert (tuple(rebuilt.shape), rebuilt.stride()) == (shape, strides)
    descs = [{"size": list(t.shape), "stride": list(t.stride()), "dtype": str(t.dtype)} for t in inputs]
    assert P.from_request(op, {}, descs).encode() == text  # the rebuilt GEMM has the key it came from
    out = fn(*inputs)
    assert out.shape == ((3, M, N) if op == "baddbmm" else (M, N))
    expected = inputs[1] @ inputs[2] + rebuilt
    assert torch.allclose(out, expected, atol=1e-5, rtol=1e-5)
