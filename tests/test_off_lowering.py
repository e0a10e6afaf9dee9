"""Where the plugin keeps aten alone, Inductor lowers the GEMM as with max-autotune off: the generated code
is off's (real Inductor compiles on the CPU, each in a fresh process and Inductor cache). And on symbolic
sizes, fast mode keeps a template only where the ranking puts it first over the sizes the graph serves.

On the GPU the same holds for Triton templates (tests/test_fast_gpu.py); on the CPU the GEMMs autotuned
are C++ templates against aten, and the convolutions max-autotune rewrites (a channels-last 1x1
convolution becomes an mm whenever GEMMs are autotuned).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ah_plugin.collect import features, log_format
from torchgen_ah.training import train_generic

pytestmark = pytest.mark.slow

CHILD = os.path.join(os.path.dirname(__file__), "off_code_child.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SWITCHES = ("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_")


def child(tmp_path, model: str, mode: str, **env) -> dict:
    """Run one compile in a fresh process with a fresh Inductor cache; its JSON line."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(_SWITCHES) or k == "TORCHINDUCTOR_VEC_ISA_OK"}
    clean.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache_{model}_{mode}_{len(os.listdir(tmp_path))}"),
                 PYTHONPATH=ROOT + os.pathsep + clean.get("PYTHONPATH", ""), **env)
    done = subprocess.run([sys.executable, CHILD, model, mode], env=clean, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


FAST = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"}


def _last_line(program: str, **env) -> str:
    """The last line a Python ``program`` prints in a fresh process with only the plugin variables ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_SWITCHES)}
    clean.update(PYTHONPATH=ROOT + os.pathsep + clean.get("PYTHONPATH", ""), **env)
    done = subprocess.run([sys.executable, "-c", program], env=clean, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("model,freeze", [("cnn", "0"), ("mlp", "1"), ("bmm", "0")])
def test_fast_mode_generates_off_code_where_aten_is_kept(tmp_path, model, freeze):
    off = child(tmp_path, model, "off", FREEZE=freeze)
    fast = child(tmp_path, model, "fast", FREEZE=freeze, **FAST)
    assert off["equal"] and fast["equal"]
    assert fast["fingerprint"] == off["fingerprint"] is not None
    if model == "cnn":
        # no convolution ranking: the convolutions were lowered as off lowers them, 1x1 ones included,
        # also where the use variable names convolutions
        assert fast["lowerings"]["off"] >= 3, fast["lowerings"]
        named = child(tmp_path, model, "fast", FREEZE=freeze, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm,convolution")
        assert named["equal"] and named["fingerprint"] == off["fingerprint"]
        # the control: max-autotune's own lowering with aten as the only GEMM backend is not off's code
        aten_only = child(tmp_path, model, "aten_only", FREEZE=freeze,
                          TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS="ATEN")
        assert aten_only["equal"] and aten_only["fingerprint"] != off["fingerprint"]
    if model == "bmm":  # no bmm ranking on a CPU: aten, lowered again as off after the C++ template was offered
        assert fast["lowerings"]["fell_back"] >= 1, fast["lowerings"]
        # the plugin's timers split its GEMM lowerings for the compile profile's phase table: the lowering
        # done as the mode says took longer than the part of it done again as off, within all GEMM lowerings
        timers = fast["plugin_seconds"]
        assert 0 < timers["ah_plugin.gemm_lowering.relowered"] < timers["ah_plugin.gemm_lowering.tuned"] \
            <= timers["ah_plugin.gemm_lowering"], timers
        assert timers["ah_plugin.decision"] > 0, timers


def test_a_compile_in_another_thread_gets_the_plugins_decision_before_code_generation(tmp_path):
    """Inductor's config, where the plugin sets its choices class before torch 2.15, holds per thread, and a
    training step's backward is compiled in autograd's device thread. A compile in a thread other than the
    one that switched the plugin on still has the plugin decide before any template is rendered (its
    pre-codegen timer ran there), and its code is off's."""
    off = child(tmp_path, "bmm", "off", THREAD="1")
    fast = child(tmp_path, "bmm", "fast", THREAD="1", **FAST)
    assert off["equal"] and fast["equal"] and fast["fingerprint"] == off["fingerprint"] is not None
    assert fast["plugin_seconds"].get("ah_plugin.decision", 0) > 0, fast["plugin_seconds"]


def test_a_grouped_mm_no_ranking_covers_is_lowered_as_off(tmp_path):
    """A mixture of experts' grouped GEMM: no ranking covers it, so fast mode lowers it as off does (on a
    GPU max-autotune's own lowering times Triton templates for it; the CPU offers none, so here the code is
    off's either way and the lowering's path is what is checked)."""
    off = child(tmp_path, "grouped", "off")
    fast = child(tmp_path, "grouped", "fast", **FAST)
    assert off["equal"] and fast["equal"]
    assert fast["fingerprint"] == off["fingerprint"] is not None
    assert fast["lowerings"]["off"] >= 1, fast["lowerings"]


def test_every_gemm_lowering_the_running_torch_has_is_wrapped():
    """Every lowering the plugin lists that this torch registers (by the op or by one overload: the grouped
    mm, the convolution's backward from torch 2.13) follows the plugin's plan (fresh process)."""
    program = (
        "import torch, ah_plugin\n"
        "ah_plugin.require_active_from_environment()\n"
        "import torch._inductor.lowering as L\n"
        "from ah_plugin.inductor.gemm_ops import LOWERED\n"
        "aten = torch.ops.aten\n"
        "keys = {n: [k for k in L.lowerings if getattr(k, 'overloadpacket', k) is getattr(aten, n, None)]"
        " for n in LOWERED}\n"
        "present = [n for n, ks in keys.items() if ks]\n"
        "print(sorted(n for n in present if not all(getattr(L.lowerings[k], '_ah_plugin_lowering', False)"
        " for k in keys[n])), sorted(present))\n")
    unwrapped, present = _last_line(program, **FAST).split("] [")
    assert unwrapped == "[", f"lowerings left to Inductor: {unwrapped}]"
    for name in ("mm", "addmm", "bmm", "_grouped_mm", "convolution"):
        assert repr(name) in present, present


@pytest.mark.parametrize("variables,expected", [
    ({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"}, "off"),
    ({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT": "convolution_bwd_weight"}, None),
    ({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm,convolution_bwd_input"}, None),
])
def test_the_convolutions_backward_is_planned_by_the_names_it_autotunes_under(variables, expected):
    """The convolution's backward lowering autotunes as convolution_bwd_weight and _input: fast mode lowers
    it as off, unless one of those names is collected or used, when Inductor's own lowering stands."""
    program = ("import ah_plugin\nfrom ah_plugin.inductor import plans\n"
               "ah_plugin.require_active_from_environment()\n"
               "print(repr(plans.lowering('convolution_backward')))\n")
    assert _last_line(program, **variables) == repr(expected), variables


def _linear_log(path, template: str, aten: str, template_wins) -> str:
    """A linear_unary log in the plugin's format: one Linear(64, 96) at several batch sizes, the template
    fastest where ``template_wins(m)``, aten elsewhere; each choice timed twice (two collection runs), so
    the leaves' data back the template (docs/use.md, "Support")."""
    rows, meta = [], None
    for m in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048):
        tensors = [{"size": [m, 64], "stride": [64, 1], "dtype": "torch.float32"},
                   {"size": [96, 64], "stride": [1, 0], "dtype": "torch.float32"},
                   {"size": [96], "stride": [1], "dtype": "torch.float32"}]
        values, num, cat = features.op_features("linear_unary", tensors)
        meta = meta or features.log_metadata(features.metadata("linear_unary", num, cat, (0, 0), 0, "cpu"))
        fast, slow = (1.0, 2.0) if template_wins(m) else (2.0, 1.0)
        for run in (1.0, 1.02):
            for choice, time_ms in ((template, fast * run), (aten, slow * run)):
                rows.append(log_format.format_row(meta, features.ordered_features(values, num, cat), choice, time_ms))
    log_format.append_rows(str(path), meta, rows)
    return str(path)


def test_fast_mode_keeps_a_template_on_symbolic_sizes_only_where_it_ranks_first_across_them(tmp_path):
    # the candidates' real ids on this CPU, from a collection of the same compile
    log = tmp_path / "collected.txt"
    child(tmp_path, "linear", "fast", FREEZE="1", DYNAMIC="1", TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="linear_unary",
          TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(log))
    choices = {line.split(",")[-2] for line in log.read_text().splitlines()[2:]}
    template = next(c for c in choices if not c.startswith("extern_"))
    aten = next(c for c in choices if c.startswith("extern_"))
    artifacts = {}
    for name, wins in (("small_m", lambda m: m < 256), ("every_m", lambda m: True)):
        data = _linear_log(tmp_path / f"{name}.txt", template, aten, wins)
        artifacts[name] = str(tmp_path / name)
        train_generic.train_from_log(data, heuristic_name=f"Linear{name.title().replace('_', '')}",
                                     out_dir=artifacts[name])
    use = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm,linear_unary", "FREEZE": "1"}

    # one symbolic graph serves batch 8 and 300; ranked at 8 alone, the template would be kept for both
    split = child(tmp_path, "linear", "fast", DYNAMIC="1", AH_PLUGIN_ARTIFACT_DIR=artifacts["small_m"], **use)
    assert split["equal"] and split["graphs"] == 1
    assert split["use_stats"]["dynamic_aten"] >= 1 and not split["cpp_gemm_template"]
    # a template first at every size is kept for the symbolic graph
    every = child(tmp_path, "linear", "fast", DYNAMIC="1", AH_PLUGIN_ARTIFACT_DIR=artifacts["every_m"], **use)
    assert every["equal"] and every["use_stats"]["dynamic_aten"] == 0 and every["cpp_gemm_template"]
