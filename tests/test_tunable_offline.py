"""Offline tuning on the CPU path: untuned files gathered and deduplicated, shapes dealt to 2 worker
processes (standing in for 2 GPUs), each rebuilt and compiled with real Inductor, gathered into
`_full0.csv` and copied per worker; the numerical check on."""

from __future__ import annotations


import pytest

import ah_plugin.tunable as tunable
from ah_plugin.policy import AutotuneRequest
from ah_plugin.tunable import offline
from ah_plugin.tunable import results_file as F
from ah_plugin.tunable import settings as S
from ah_plugin.tunable.store import store


@pytest.fixture
def env(tunable_env, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tunable_env / "inductor"))
    yield tunable_env


def test_numerically_rejected_candidates_are_never_offered_or_recorded(env, monkeypatch):
    monkeypatch.setenv(S.ENABLED, "1")
    request = AutotuneRequest("mm", {}, {}, ["extern_mm", "type=triton_A", "type=triton_B"], tensors=[
        {"size": [8, 4], "stride": [4, 1], "dtype": "torch.float16"},
        {"size": [4, 2], "stride": [2, 1], "dtype": "torch.float16"}])
    store().excluded[("mm", "NN_8_2_4_ld_4_2_float16")] = {"type=triton_A"}
    assert tunable.policy().select(request) == ["extern_mm", "type=triton_B"]
    tunable.policy().on_timings(request, {"extern_mm": 0.3, "type=triton_A": 0.1, "type=triton_B": 0.2}, [])
    assert tunable.get_results() == (("mm", "NN_8_2_4_ld_4_2_float16", "type=triton_B", 0.2),)
    import torch

    ref = torch.ones(3)
    assert offline._close(ref + 1e-6, ref, 1e-5, 1e-5) and not offline._close(ref + 1e-3, ref, 1e-5, 1e-5)


@pytest.mark.slow
def test_mgpu_tune_gathers_dedups_and_copies(env, monkeypatch):
    monkeypatch.setenv(S.NUMERICAL_CHECK, "1")
    a, b = "NN_13_8_40_ld_40_8_float32", "NT_6_8_40_ld_40_40_float32"
    (env / "untuned0.csv").write_text(f"packed_linear,{a}\npacked_linear,{b}\n")
    (env / "untuned1.csv").write_text(f"packed_linear,{a}\npacked_linear,NN_*_8_40_ld_40_8_float32\n")
    with pytest.warns(F.TunableFileWarning, match=r"untuned1.csv:2: .*wildcards"):
        assert offline.gather_untuned(str(env / "untuned*.csv")) == [("packed_linear", a), ("packed_linear", b)]
    full0 = tunable.mgpu_tune_gemm_in_file(str(env / "untuned*.csv"), 2)
    assert full0 == str(env / "res_full0.csv")
    validators = F.current_validators()
    gathered = F.read_results(full0, validators)
    assert not gathered.rejected
    solutions = {params: e.solution for (_, params), e in gathered.entries.items()}
    assert set(solutions) == {a, b}  # each worker tuned its own shape, both gathered
    assert all(s.startswith(("extern__mkl_linear", "cpp_")) for s in solutions.values()), solutions
    assert (env / "res_full1.csv").read_text() == (env / "res_full0.csv").read_text()
    per_worker = [F.read_results(str(env / f"res{i}.csv"), validators).entries for i in (0, 1)]
    assert [len(e) for e in per_worker] == [1, 1]  # round-robin: one shape per worker
