"""Plugin core on plain data and in-process Inductor state (no compiles): ids, features, settings,
switch-on/off, built-in takeover, cache-key identity."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings

import pytest

from ah_plugin.use import choice_ids
from ah_plugin.collect import features
from ah_plugin.config import settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- choice ids -----------------------------------------------------------------------------------


def _mm_params(**kw):
    base = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, num_stages=3, num_warps=4, GROUP_M=8,
                EVEN_K=True, ALLOW_TF32=False, ACC_TYPE="tl.float32", USE_FAST_ACCUM=False)
    base.update(kw)
    return base


def test_classic_triton_mm_id_is_upstreams():
    cid = choice_ids.choice_id("triton", "mm", _mm_params())
    assert cid == "type=triton_BLOCK-M=128_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"


def test_aten_ids_are_upstreams():
    assert choice_ids.choice_id("extern", "mm") == "extern_mm"
    assert choice_ids.choice_id("extern", "_mkl_linear") == "extern__mkl_linear"


def test_ids_distinguish_templates_and_group_m():
    classic = choice_ids.choice_id("triton", "mm", _mm_params())
    group4 = choice_ids.choice_id("triton", "mm", _mm_params(GROUP_M=4))
    tma = choice_ids.choice_id("triton", "mm_persistent_tma", _mm_params(NUM_SMS=132))
    tma_other_device = choice_ids.choice_id("triton", "mm_persistent_tma", _mm_params(NUM_SMS=108))
    dk = choice_ids.choice_id("subgraph", "decompose_k", {"k_split": 32})
    cpp = choice_ids.choice_id("cpp", "CppMicroGemmFP32Vec", {"register_blocking": (4, 16, 1)})
    assert len({classic, group4, tma, dk, cpp}) == 5
    assert group4.endswith("_GROUP-M=4")
    assert tma.startswith("type=triton-mm_persistent_tma_BLOCK-M=128")
    assert tma == tma_other_device  # the SM count is the device's, not a choice
    assert dk == "subgraph_decompose_k_k_split=32"
    assert cpp == "cpp_CppMicroGemmFP32Vec_bm4_bn16_bk1"
    assert "," not in "".join([classic, group4, tma, dk, cpp])


def test_unique_ids_are_deterministic():
    ids = ["a", "b", "a", "a", "c"]
    assert choice_ids.unique_ids(ids) == ["a", "b", "a#2", "a#3", "c"]
    assert choice_ids.base_id("a#3") == "a" and choice_ids.base_id("x") == "x"


# --- features -------------------------------------------------------------------------------------


def _t(size, stride, dtype="torch.bfloat16"):
    return {"size": list(size), "stride": list(stride), "dtype": dtype}


def test_mm_features_match_builtin_columns():
    feats, num, cat = features.op_features("mm", [_t((8192, 1024), (1024, 1)), _t((1024, 256), (1, 1024))])
    assert num == ["m", "k", "n", "mat1_stride_0", "mat1_stride_1", "mat2_stride_0", "mat2_stride_1"]
    assert cat == ["mat1_dtype", "mat2_dtype", "mat1_iscontig", "mat2_iscontig", "using_tf32"]
    assert (feats["m"], feats["k"], feats["n"]) == (8192, 1024, 256)
    assert feats["mat1_iscontig"] is True and feats["mat2_iscontig"] is False
    assert feats["using_tf32"] == "not_float_32" and feats["mat1_dtype"] == "torch.bfloat16"
    f32, _, _ = features.op_features("mm", [_t((4, 4), (4, 1), "torch.float32")] * 2, tf32_enabled=True)
    assert f32["using_tf32"] is True


def test_bmm_addmm_and_generic_features():
    b, num, _ = features.op_features("bmm", [_t((3, 8, 4), (32, 4, 1)), _t((3, 4, 2), (8, 2, 1))])
    assert num[0] == "b" and b["b"] == 3 and (b["m"], b["k"], b["n"]) == (8, 4, 2)
    a, num, _ = features.op_features("addmm", [_t((8, 2), (0, 1)), _t((8, 4), (4, 1)), _t((4, 2), (2, 1))])
    assert a["bias_stride_0"] == 0 and "bias_stride_1" in num
    g, num, cat = features.op_features("packed_linear", [_t((16, 64), (64, 1), "torch.float32")])
    assert g == {"in0_size_0": 16, "in0_size_1": 64, "in0_stride_0": 64, "in0_stride_1": 1,
                 "in0_dtype": "torch.float32"}
    assert cat == ["in0_dtype"]


def test_log_metadata_keeps_upstream_keys():
    meta = features.metadata("mm", ["m"], ["mat1_dtype"], (9, 0), 232448, "NVIDIA H200")
    assert meta["device_name"] == "NVIDIA H200"
    assert list(features.log_metadata(meta)) == [
        "shared_memory", "device_capa", "name", "numerical_features", "categorical_features"]


# --- settings -------------------------------------------------------------------------------------


def test_env_wins_over_api():
    settings.set_api_values(collect="mm", top_k=3)
    try:
        env = {settings.ENV_COLLECT: "bmm,addmm", settings.ENV_TOP_K: "7"}
        cur = settings.current(env)
        assert cur.collect == frozenset({"bmm", "addmm"}) and cur.top_k == 7
        cur = settings.current({})
        assert cur.collect == frozenset({"mm"}) and cur.top_k == 3
        assert settings.current({settings.ENV_DISABLE: "1"}).active is False
    finally:
        settings.set_api_values()


def test_env_switch_detection_and_bad_values():
    assert not settings.env_requests_plugin({})
    assert not settings.env_requests_plugin({settings.ENV_USE: "mixed_mm"})  # built-in only
    assert settings.env_requests_plugin({settings.ENV_USE: "mm"})
    assert settings.env_requests_plugin({"AH_TUNABLE_ENABLED": "1"})
    assert settings.current({settings.ENV_LOG_PATH: "DEFAULT"}).log_path is None
    with pytest.warns(UserWarning, match="AH_PLUGIN_TOP_K='ten'.*USE ranking is off"):
        bad = settings.current({settings.ENV_TOP_K: "ten", settings.ENV_USE: "mm"})
    assert bad.ranking_off == (settings.ENV_TOP_K,) and bad.use == frozenset({"mm"})  # only the ranking is off
    with pytest.raises(TypeError):
        settings.set_api_values(nonsense=1)


# --- install / uninstall / built-in takeover --------------------------------------------------------


@pytest.fixture
def clean_plugin(monkeypatch):
    for name in (settings.ENV_COLLECT, settings.ENV_USE, settings.ENV_LOG_PATH):
        monkeypatch.delenv(name, raising=False)
    import ah_plugin

    ah_plugin.uninstall()
    yield ah_plugin
    ah_plugin.uninstall()


def test_install_uninstall_restore_inductor_state(clean_plugin, monkeypatch):
    import torch._inductor.config as ic
    from ah_plugin.inductor import adapter
    from ah_plugin.policy import registry

    monkeypatch.setenv(settings.ENV_COLLECT, "mm")  # what the built-in reads (torch 2.13: at each call)
    if isinstance(getattr(ic, "autoheuristic_collect", None), str):  # torch 2.11: read into config at import
        with ic.patch(autoheuristic_collect="mm"):
            _install_uninstall_restore(clean_plugin, ic, adapter, registry)
    else:
        _install_uninstall_restore(clean_plugin, ic, adapter, registry)


def _built_handler(ic):
    """The choices handler Inductor builds now: the registered ones composed (torch 2.15), else the class the
    config names."""
    from torch._inductor import choices

    create = getattr(choices, "create_inductor_choices", None)
    if create is not None:
        return create(ic.inductor_choices_class)
    return (ic.inductor_choices_class or choices.InductorChoices)()


def _read_in_new_thread(read):
    """What ``read()`` returns in a thread started for it."""
    import threading

    seen = []
    worker = threading.Thread(target=lambda: seen.append(read()))
    worker.start()
    worker.join()
    return seen[0]


def _install_uninstall_restore(clean_plugin, ic, adapter, registry):
    before_class = ic.inductor_choices_class
    before_fns = (ic.__dict__["collect_autoheuristic"], ic.__dict__["use_autoheuristic"])
    assert adapter.builtin_would_act("mm")  # the built-in alone would collect mm

    clean_plugin.install(collect=["mm"])
    assert adapter.is_installed()
    assert not adapter.builtin_would_act("mm")  # exactly one collector: ours
    assert not ic.collect_autoheuristic("mm") and not ic.use_autoheuristic("mm")
    from ah_plugin.inductor.choices import PluginChoices

    handler = _built_handler(ic)
    assert isinstance(handler, PluginChoices) and "ah_plugin:" in str(handler.uuid())
    assert "CollectorPolicy" in clean_plugin.status()["policies"]
    # a thread started now (autograd's device thread compiles a backward) reads the same class
    assert _read_in_new_thread(lambda: ic.inductor_choices_class) is ic.inductor_choices_class

    clean_plugin.uninstall()
    assert not adapter.is_installed()
    assert ic.inductor_choices_class is before_class
    assert _read_in_new_thread(lambda: ic.inductor_choices_class) is before_class
    assert before_class is not None or not isinstance(_built_handler(ic), PluginChoices)
    assert (ic.__dict__["collect_autoheuristic"], ic.__dict__["use_autoheuristic"]) == before_fns
    assert adapter.builtin_would_act("mm")
    assert registry.registered_policies() == []


def test_context_manager_restores_previous_state(clean_plugin):
    from ah_plugin.inductor import adapter
    from ah_plugin.policy import registry

    with clean_plugin.enabled(collect="packed_linear"):
        assert adapter.is_installed()
        assert settings.current().collect == frozenset({"packed_linear"})
    assert not adapter.is_installed()
    assert settings.api_values() == {}

    clean_plugin.install(collect="mm")
    with clean_plugin.enabled(collect="bmm"):
        assert settings.current().collect == frozenset({"bmm"})
    assert adapter.is_installed() and settings.current().collect == frozenset({"mm"})


def test_builtin_only_ops_are_not_taken_over(clean_plugin, monkeypatch):
    from ah_plugin.inductor import adapter
    from ah_plugin.policy import registry

    monkeypatch.setenv(settings.ENV_COLLECT, "pad_mm,mm")
    builtin_pad_mm = adapter.builtin_would_act("pad_mm")  # torch read its env at import
    clean_plugin.install()
    assert settings.current().handled_ops == frozenset({"mm", "packed_linear"})
    assert adapter.builtin_would_act("pad_mm") == builtin_pad_mm
    assert not adapter.builtin_would_act("mm")


def test_switching_modes_changes_the_cache_key(clean_plugin):
    import torch._inductor.config as ic

    clean_plugin.install(use="mm", top_k=4)
    key_use = _built_handler(ic).uuid()
    clean_plugin.install(use="mm", top_k=5)
    key_top5 = _built_handler(ic).uuid()
    clean_plugin.install(collect="mm")
    key_collect = _built_handler(ic).uuid()
    assert len({key_use, key_top5, key_collect}) == 3
    config_key = ic.save_config_portable()["inductor_choices_class"] if hasattr(ic, "save_config_portable") else None
    if config_key is not None and not isinstance(config_key, str):  # torch 2.11 keeps the object; its pickle
        config_key = pickle.loads(pickle.dumps(config_key)).uuid()  # carries the uuid (ChoicesFactory.__reduce__)
    assert config_key is None or config_key == key_collect


def test_chains_to_previous_choices_class(clean_plugin):
    import torch._inductor.config as ic
    from torch._inductor.choices import InductorChoices

    calls = []

    class Previous(InductorChoices):
        def uuid(self):
            return "previous-v1"

        def _finalize_template_configs(self, *args, **kwargs):
            calls.append(1)
            return super()._finalize_template_configs(*args, **kwargs)

    # Not monkeypatch.setattr: pytest >= 9.2 undoes it on a module with delattr, which hides a torch
    # config entry for the rest of the process. Inductor's own patch() restores the value.
    with ic.patch(inductor_choices_class=Previous):
        clean_plugin.install(use="mm")
        handler = ic.inductor_choices_class()
        assert isinstance(handler, Previous)
        assert "previous-v1" in handler.uuid()
        assert handler._finalize_template_configs({}, None, [], "conv") == [] and calls == [1]
        clean_plugin.uninstall()
        assert ic.inductor_choices_class is Previous
    assert ic.inductor_choices_class is None


def test_import_torch_without_variables_imports_nothing_heavy():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("TORCHINDUCTOR_AUTOHEURISTIC") or k.startswith("AH_"))}
    code = (
        "import sys, torch, importlib.metadata as md\n"
        "assert any(e.name == 'ah_plugin' for e in md.entry_points(group='torch.backends'))\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('ah_plugin'))\n"
        "print(loaded)\n"
        "assert loaded in (['ah_plugin', 'ah_plugin._autoload', 'ah_plugin.version'], []), loaded\n"
        "assert 'torch._inductor.select_algorithm' not in sys.modules\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ah_plugin._autoload" in out.stdout  # the entry point did run


def test_autoload_never_breaks_import_torch():
    """A bad AH_PLUGIN_TOP_K warns at ``import torch`` and turns off only the ranking: collection is switched
    on, its hooks in once Inductor is imported."""
    env = dict(os.environ, TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm", AH_PLUGIN_TOP_K="not-a-number")
    code = ("import sys, torch, ah_plugin; print('ON', ah_plugin.status()['installed']); "
            "import torch._inductor.config; adapter = sys.modules.get('ah_plugin.inductor.adapter'); "
            "print('HOOKS', bool(adapter and adapter.is_installed()), ah_plugin.status()['policies'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ON True" in out.stdout and "HOOKS True ['CollectorPolicy']" in out.stdout, out.stdout
    said = out.stderr.index("AH_PLUGIN_TOP_K='not-a-number'")
    assert "USE ranking is off" in out.stderr[said:]


# --- search space -----------------------------------------------------------------------------------


def test_search_space_filters_what_the_device_cannot_run():
    from ah_plugin.collect import search_space

    hopper = 232448
    big = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_stages=4, num_warps=8)  # 262144 B of bf16 tiles
    assert search_space.pipeline_shared_memory(big, 2) == 262144
    assert not search_space.fits_device(big, 2, hopper)
    ok = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3, num_warps=4)
    assert search_space.fits_device(ok, 2, hopper)
    spills = dict(BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, num_stages=2, num_warps=4)  # 512 acc regs
    assert not search_space.fits_device(spills, 2, hopper)


def test_search_space_sample_is_deterministic_per_input():
    from ah_plugin.collect import search_space

    ids = [f"cfg{i}" for i in range(50)]
    a = search_space.sample(ids, 10, {"m": 128, "k": 64, "n": 32})
    assert a == search_space.sample(list(reversed(ids)), 10, {"n": 32, "k": 64, "m": 128})
    b = search_space.sample(ids, 10, {"m": 256, "k": 64, "n": 32})
    assert len(a) == len(set(a)) == 10 and a != b
    assert search_space.sample(ids[:3], 10, {"m": 1}) == ids[:3]


def test_bad_variable_after_switch_on_never_raises_inside_inductor(clean_plugin, monkeypatch):
    """Inductor calls the built-in's switches and the choices class's uuid() outside our guarded hooks:
    a variable set to a bad value after the switch-on (or before ``tunable.enable()``) must not raise."""
    import torch._inductor.config as ic

    clean_plugin.install(use="mm")
    monkeypatch.setenv(settings.ENV_TOP_K, "abc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ic.use_autoheuristic("mm") in (True, False)
        assert not ic.collect_autoheuristic("mm")
        assert "ranking_off=AH_PLUGIN_TOP_K" in str(_built_handler(ic).uuid())  # a new key, no raise
        if hasattr(ic, "save_config_portable"):
            ic.save_config_portable()  # what the FX-graph cache key calls


def _fresh_python(code: str, **env_vars: str) -> subprocess.CompletedProcess:
    """`code` in a new interpreter whose environment holds no plugin variable but `env_vars`."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_PLUGIN", "AH_TUNABLE")))}
    env.update(env_vars)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_tools_switch_the_plugin_on_when_torch_found_no_entry_point():
    """With the package on the path but torch's backend entry points not loaded (as when it is not
    installed), a COLLECT variable alone leaves the plugin off and torch's own collector would write the
    log; require_active_from_environment switches ours on, and does nothing when no variable asks."""
    code = ("import torch, ah_plugin; before = ah_plugin.status()['installed']; "
            "after = ah_plugin.require_active_from_environment(); "
            "print(before, after['installed'], sorted(after['settings'].collect))")
    asked = _fresh_python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm")
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert asked.stdout.split("\n")[-2] == "False True ['mm']"
    quiet = _fresh_python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert quiet.stdout.split("\n")[-2] == "False False []"
    bad = _fresh_python(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm",
                        AH_PLUGIN_TOP_K="many")  # a bad k: warned, the ranking off, collection on
    assert bad.returncode == 0 and "AH_PLUGIN_TOP_K='many'" in bad.stderr, bad.stderr[-2000:]
    assert bad.stdout.split("\n")[-2] == "False True ['mm']"


_THREAD_CACHE_PROGRAM = """
import queue, threading, torch, ah_plugin
from torch._dynamo.utils import counters

jobs, done = queue.Queue(), queue.Queue()

def worker():  # started before the plugin, and lives on: as autograd's device thread does
    for job in iter(jobs.get, None):
        done.put(job())

threading.Thread(target=worker, daemon=True).start()

def f(a, b):
    return torch.bmm(a, b).relu()

args = (torch.randn(4, 32, 48), torch.randn(4, 48, 16))

def hits_and_misses_in_the_worker():
    torch._dynamo.reset()
    counters.clear()
    jobs.put(lambda: torch.compile(f, mode="max-autotune-no-cudagraphs")(*args))
    done.get()
    return [counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]]

before = hits_and_misses_in_the_worker()
ah_plugin.install(use="mm", time_unbacked=True)
first = hits_and_misses_in_the_worker()
ah_plugin.install(use="mm", time_unbacked=False)
other = hits_and_misses_in_the_worker()
again = hits_and_misses_in_the_worker()
print(before, first, other, again)
"""


@pytest.mark.slow
def test_a_compile_in_another_thread_keys_the_graph_cache_with_the_plugins_settings(tmp_path):
    """Autograd compiles a training step's backward in its device thread, which lives as long as the process,
    and before torch 2.15 an assignment to Inductor's config holds in the assigning thread only: the FX-graph
    cache key built there must still carry the plugin's settings, also where that thread compiled before the
    plugin was switched on, or a graph compiled under other settings (or none) is loaded from the cache
    (fresh process, real compiles on the CPU, Inductor's cache in a new folder)."""
    done = _fresh_python(_THREAD_CACHE_PROGRAM, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"),
                         TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    assert done.returncode == 0, done.stderr[-3000:]
    before, first, other, again = done.stdout.strip().splitlines()[-1].split("] [")
    # each setting (none, then two of the plugin's) compiled for itself
    assert (before, first, other) == ("[0, 1", "0, 1", "0, 1"), done.stdout
    assert again == "1, 0]", done.stdout  # the control: the cache answers the same settings


def test_the_tools_compile_caches_are_off_in_every_thread():
    """``without_compile_caches`` (each evaluation mode autotunes afresh) reaches a thread started after it,
    as autograd's device thread, which compiles a training step's backward (fresh process)."""
    done = _fresh_python(
        "import threading\n"
        "import torch._functorch.config as fc, torch._inductor.config as ic\n"
        "from ah_plugin.inductor import compile_tools\n"
        "compile_tools.without_compile_caches()\n"
        "seen = []\n"
        "worker = threading.Thread(target=lambda: seen.append((ic.fx_graph_cache, ic.autotune_local_cache,"
        " fc.enable_autograd_cache)))\n"
        "worker.start(); worker.join(); print(seen[0])\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "(False, False, False)", done.stdout
