"""Quality mode's padded candidate: padding as one more candidate of an mm's autotuning instead of the
pad_mm pass's separate benchmark. Real Inductor compiles on the CPU path (``AH_PLUGIN_PADDED_CHOICE=on``
offers it there; by default it is offered on CUDA only), the real settings, ranking rules and pass hook."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from ah_plugin.config import settings  # noqa: E402
from ah_plugin.use.choice_ids import PADDED_CHOICE_ID  # noqa: E402
from ah_plugin.inductor.padded_choice import padded_sizes  # noqa: E402
from ah_plugin.inductor.patches import pad_mm  # noqa: E402
from ah_plugin.use.ranking import UseOptions, choose  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_sizes_are_padded_as_the_pass_pads_them():
    assert padded_sizes(64, 101, 30, torch.bfloat16) == (64, 104, 32)  # 16 bytes: 8 two-byte elements
    assert padded_sizes(64, 101, 30, torch.float32) == (64, 104, 32)  # 4 four-byte elements
    assert padded_sizes(13, 1000, 4099, torch.bfloat16) == (16, 1000, 4104)
    assert padded_sizes(64, 128, 32, torch.bfloat16) is None  # aligned: nothing to offer
    assert padded_sizes(64, 101, 30, torch.int8) is None  # not offered for integer GEMMs: the pass decides


def test_the_candidates_graph_pads_only_the_operands_that_need_it():
    """2048x768x1001: only B's N is unaligned, so A is multiplied as it is (a pad of nothing copies it: on
    an H200 the candidate as first measured copied A and lost to the pass's padding)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from ah_plugin.inductor.padded_choice import padded_mm

    def pads(sizes):
        m, k, n = sizes
        fn = lambda a, b: padded_mm(a, b, sizes=sizes, padded=padded_sizes(m, k, n, torch.bfloat16))  # noqa: E731
        # Entries in {-1, 0, 1}: every partial sum is an exact integer in float32, so the padded product must
        # equal the plain one bit for bit whatever order the CPU's GEMM accumulates in (random normals made
        # the comparison depend on the blocking a padded K gets).
        gen = torch.Generator().manual_seed(m * 7 + k * 5 + n)
        a = torch.randint(-1, 2, (m, k), generator=gen).to(torch.bfloat16)
        b = torch.randint(-1, 2, (k, n), generator=gen).to(torch.bfloat16)
        graph = make_fx(fn)(a, b).graph
        assert torch.equal(fn(a, b), a @ b)
        return [tuple(node.args[0].meta["val"].shape) for node in graph.nodes
                if node.op == "call_function" and "constant_pad_nd" in str(node.target)]

    assert pads((2048, 768, 1001)) == [(768, 1001)]  # B alone
    assert pads((13, 1000, 4099)) == [(13, 1000), (1000, 4099)]  # M and N: both
    assert pads((64, 101, 32)) == [(64, 101), (101, 32)]  # K: both


@pytest.mark.parametrize("value, device, quality, offered", [
    ("auto", "cuda", True, True), ("auto", "cpu", True, False), ("on", "cpu", True, True),
    ("off", "cuda", True, False), ("auto", "cuda", False, False)])
def test_offered_in_quality_mode_on_cuda_unless_switched(value, device, quality, offered):
    env = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_TOP_K": "quality" if quality else "fast",
           settings.ENV_PADDED_CHOICE: value}
    assert settings.current(env).offers_padded(device) is offered


def test_a_bad_value_names_the_variable_and_the_values():
    with pytest.raises(ValueError, match="padded_choice='sometimes': expected one of auto, on, off"):
        settings.set_api_values(padded_choice="sometimes")
    settings.set_api_values()


def test_quality_mode_always_times_the_padded_candidate_and_fast_mode_never_keeps_it():
    """No packaged ranking was trained with the candidate, so it is not ranked: quality mode keeps it beside
    its top templates and aten; fast mode keeps what the ranking says."""
    candidates = ["extern_mm", "type=triton_a", "type=triton_b", PADDED_CHOICE_ID]
    ranking = [("type=triton_a", 0.6), ("extern_mm", 0.3), ("type=triton_b", 0.1)]
    assert choose(ranking, candidates, UseOptions(top_k=1, quality=True)) == \
        ["type=triton_a", "extern_mm", PADDED_CHOICE_ID]
    assert PADDED_CHOICE_ID not in choose(ranking, candidates, UseOptions(fast=True))


def test_the_pass_leaves_an_unaligned_mm_to_the_candidate_only_where_it_is_offered(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_AUTOHEURISTIC_USE", "mm")
    monkeypatch.setenv("AH_PLUGIN_TOP_K", "quality")
    monkeypatch.setenv(settings.ENV_PADDED_CHOICE, "on")
    from torch._inductor import config as inductor_config

    unaligned = (torch.zeros(64, 101, dtype=torch.bfloat16), torch.zeros(101, 30, dtype=torch.bfloat16))
    aligned = (torch.zeros(64, 128, dtype=torch.bfloat16), torch.zeros(128, 32, dtype=torch.bfloat16))
    with inductor_config.patch(max_autotune=True):
        assert pad_mm._padded_candidate_offered(torch.ops.aten.mm, *unaligned)
        assert not pad_mm._padded_candidate_offered(torch.ops.aten.mm, *aligned)
        assert not pad_mm._padded_candidate_offered(torch.ops.aten.addmm, *unaligned)  # mm only
        ints = (torch.zeros(64, 101, dtype=torch.int8), torch.zeros(101, 30, dtype=torch.int8))
        assert not pad_mm._padded_candidate_offered(torch.ops.aten.mm, *ints)  # no candidate for it: the pass
        monkeypatch.setenv(settings.ENV_PADDED_CHOICE, "off")
        assert not pad_mm._padded_candidate_offered(torch.ops.aten.mm, *unaligned)
    monkeypatch.setenv(settings.ENV_PADDED_CHOICE, "on")
    with inductor_config.patch(max_autotune=False, max_autotune_gemm=False):
        assert not pad_mm._padded_candidate_offered(torch.ops.aten.mm, *unaligned)  # no autotuning: the pass


def test_the_aten_margin_holds_for_the_padded_candidate_as_for_a_template():
    """Inductor counts subgraph candidates as extern; the margin must not: a candidate 1% faster than aten
    (margin 2%) loses to it, and a template then competes with aten, not with the candidate."""
    from ah_plugin.inductor.autotune import _apply_margin

    aten, padded, template = object(), object(), object()
    timings = {aten: 10.0, padded: 9.9, template: 9.85}
    _apply_margin(timings, [aten, padded, template], ["extern_mm", PADDED_CHOICE_ID, "type=triton_x"], 0.02)
    assert min(timings, key=timings.get) is aten
    timings = {aten: 10.0, padded: 9.0, template: 9.85}
    _apply_margin(timings, [aten, padded, template], ["extern_mm", PADDED_CHOICE_ID, "type=triton_x"], 0.02)
    assert min(timings, key=timings.get) is padded  # 10% faster: it wins


def test_not_offered_where_the_compile_could_not_run_a_subgraph_or_pads_anyway():
    from torch._inductor import config as inductor_config

    from ah_plugin.inductor.padded_choice import autotuning_gemms

    with inductor_config.patch(max_autotune=True):
        assert autotuning_gemms()
        for switch in ({"cpp_wrapper": True}, {"force_shape_pad": True}):
            with inductor_config.patch(switch):
                assert not autotuning_gemms(), switch


CHILD = r'''
import json, sys, torch
import ah_plugin
from ah_plugin.inductor import adapter as inductor
from ah_plugin.policy import ChoicePolicy, registry
from ah_plugin.use.choice_ids import PADDED_CHOICE_ID
from ah_plugin.inductor import compile_tools
from torch._inductor.utils import run_and_get_code
ah_plugin.require_active_from_environment()
inductor.install()
records, timings = [], []
compile_tools.observe_autotunings(records)
compile_tools.on_timings(lambda name, times: timings.append(times))
if sys.argv[1].startswith("padded_"):  # a policy that keeps the padded candidate alone: it must run, and be right
    class PaddedOnly(ChoicePolicy):
        op_names = {"mm"}
        def select(self, request):
            return [c for c in request.candidates if c == PADDED_CHOICE_ID] or None
    registry.register_policy(PaddedOnly(), registry.POSITION_CACHE)
a, b = torch.randn(64, 101), torch.randn(101, 30)
mode = None if sys.argv[1] == "no_max_autotune" else "max-autotune-no-cudagraphs"
fn = (lambda x, y: torch.cat([x @ y, x[:, :30]])) if sys.argv[1] == "padded_cat" else (lambda x, y: (x @ y).relu())
f = torch.compile(fn, mode=mode, dynamic=False)
res, codes = run_and_get_code(f, a, b)
print("RESULT " + json.dumps({"right": bool(torch.allclose(res, fn(a, b), atol=1e-4)),
                              "outer": records[0] if records else None, "timings": timings[:1],
                              "runs_padded": any("subgraph: ah_padded_mm" in c and "(64, 104)" in c for c in codes)}))
'''


def _child(tmp_path, case, padded_choice):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / case), TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
               AH_PLUGIN_TOP_K="quality", AH_PLUGIN_PADDED_CHOICE=padded_choice)
    proc = subprocess.run([sys.executable, "-c", CHILD, case], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook failed" not in proc.stderr, proc.stderr[-3000:]  # the plugin's guarded hooks all ran
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])


@pytest.mark.slow
def test_the_padded_candidate_is_timed_with_aten_and_computes_the_product_when_kept(tmp_path):
    timed = _child(tmp_path, "quality", "on")
    assert timed["right"]
    assert timed["outer"]["offered"] == ["extern_mm", PADDED_CHOICE_ID]
    assert timed["outer"]["timed"] == ["extern_mm", PADDED_CHOICE_ID]  # one autotuning, both timed
    [times] = timed["timings"]
    assert 0 < times[PADDED_CHOICE_ID] < float("inf")  # its benchmark ran: a time, not a failure's inf
    kept = _child(tmp_path, "padded_only", "on")
    assert kept["right"] and kept["outer"]["offered"] == [PADDED_CHOICE_ID]
    assert kept["runs_padded"]  # the compiled call multiplies the padded 64x104 operand
    # a consumer that could take the result's buffer (cat): the candidate still writes what is read
    cat = _child(tmp_path, "padded_cat", "on")
    assert cat["right"] and cat["outer"]["offered"] == [PADDED_CHOICE_ID] and cat["runs_padded"]
    off = _child(tmp_path, "off", "off")
    assert off["right"] and PADDED_CHOICE_ID not in json.dumps(off["outer"])
    plain = _child(tmp_path, "no_max_autotune", "on")  # without max-autotune nothing is autotuned, nor offered
    assert plain["right"] and PADDED_CHOICE_ID not in json.dumps(plain["outer"])


GPU_CHILD = r'''
import json, torch
import ah_plugin
from ah_plugin.inductor import adapter as inductor
from ah_plugin.inductor import compile_tools
ah_plugin.require_active_from_environment()
inductor.install()
records = []
compile_tools.observe_autotunings(records)
a = torch.randn(2048, 768, device="cuda", dtype=torch.bfloat16)
b = torch.randn(768, 1001, device="cuda", dtype=torch.bfloat16)
f = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs", dynamic=False)
res = f(a, b)
# cuBLAS on the unaligned operands is the less accurate of the two here (about 0.6 against 0.45 from the
# float64 product): the compiled result is held to eager's own accuracy, not to eager's result
exact = a.double() @ b.double()
error = (res.double() - exact).abs().max()
right = bool(error <= 1.25 * ((a @ b).double() - exact).abs().max() and error <= 2e-2 * exact.abs().max())
print("RESULT " + json.dumps({"right": right, "records": [r for r in records if r.get("op", "mm") == "mm"]}))
'''


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on the device machine)")
def test_on_a_gpu_quality_mode_times_the_unaligned_gemm_padded_beside_its_templates(tmp_path):
    """2048x768x1001 bf16: cuBLAS takes a slow path on the unaligned N (39 us on an H200, 13 us padded); the
    pass leaves the mm unpadded, and quality mode times the padded candidate with its templates and aten."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_"))}
    env.update(PYTHONPATH=REPO, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
               AH_PLUGIN_TOP_K="quality", AH_PLUGIN_PADDED_CHOICE="auto")
    proc = subprocess.run([sys.executable, "-c", GPU_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hook failed" not in proc.stderr, proc.stderr[-3000:]
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])
    assert out["right"]
    outer = [r for r in out["records"] if PADDED_CHOICE_ID in r["offered"]]
    assert len(outer) == 1, out["records"]  # the unpadded mm was autotuned once, with the candidate
    assert PADDED_CHOICE_ID in outer[0]["timed"] and "extern_mm" in outer[0]["timed"]
