"""The plugin's contract with Inductor (ah_plugin/inductor/contract.py), checked on the torch this runs on:
every hook of the table exists with the signature the plugin calls it with; each symbol of each row, taken
away from torch, turns off that row alone, named to the user once, and a real compile still equals eager; a
real compile on the CPU reaches every hook the CPU path can reach; a GPU autotuning's candidates would be
timed by the plugin's replay (not per call); a user's choices handler that takes the plugin's hook is named;
and docs/inductor_versions.md shows the table as it is. CI runs it on torch 2.13 and 2.14.1;
docs/inductor_versions.md has the commands for 2.11 and 2.15.
"""

from __future__ import annotations

import json
import os
from importlib.machinery import ModuleSpec
import subprocess
import sys
import warnings

import pytest
import torch

from ah_plugin.inductor import contract
from linear_child import child_env

TORCH = ".".join(torch.__version__.split(".")[:2])
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("hook", contract.HOOKS, ids=lambda hook: hook.name)
def test_every_hook_is_present_as_the_plugin_calls_it(hook):
    assert TORCH in hook.checked_on, f"torch {TORCH} is not among the versions the contract was checked on"
    problem = contract.probe(hook)
    assert problem is None, f"{hook.name}: {problem}; the plugin would do without: {hook.without}"


def test_a_probe_names_what_moved():
    # a real function with other parameters, and a path that does not exist
    moved = contract._leading(torch.nn.functional.relu, ("match", "mat1"))
    assert moved and moved.startswith("takes (input, inplace")
    assert "not found" in contract._present("torch._inductor.no_such_module.thing")[1]
    assert contract._present("torch.no_such_thing | torch.nn")[1] is None  # either will do
    line = contract.missing_line("mode_options", "torch._inductor.list_mode_options not found")
    assert line == ("fast and quality modes: mode='max-autotune' autotunes GEMMs only: off "
                    "(torch._inductor.list_mode_options not found); mode='max-autotune' keeps its tuning of "
                    "every kernel (compile time of default max-autotune's order)")


def test_the_docs_table_is_the_contracts():
    """docs/inductor_versions.md shows the table as ``python -m ah_plugin.inductor.contract`` prints it."""
    with open(os.path.join(REPO, "docs", "inductor_versions.md"), encoding="utf-8") as f:
        text = f.read()
    start, end = "<!-- contract-table: python -m ah_plugin.inductor.contract -->", "<!-- /contract-table -->"
    assert start in text and end in text, "docs/inductor_versions.md lost its contract-table marks"
    shown = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert shown == contract.markdown_table(), "regenerate it: python -m ah_plugin.inductor.contract"


# --------------------------------------------------------------------------- a symbol taken away

def _config_entry(owner, name):
    """(the config module, the entry's key) when ``owner.name`` is an Inductor or Dynamo config entry."""
    root, prefix = owner, ""
    if type(owner).__name__ == "SubConfigProxy":
        root, prefix = vars(owner)["_config"], vars(owner)["_prefix"]
    entries = getattr(root, "_config", None)
    if isinstance(entries, dict) and prefix + name in entries:
        return root, prefix + name
    return None


def _take_away(patch, symbol: str) -> None:
    """Every alternative of ``symbol`` this torch has, gone for the length of ``patch``: a module loses its
    spec (the import system no longer knows it), a class attribute goes from the class and its bases, a
    config entry from its config, a lowering from Inductor's table (every key of the op)."""
    for path in (part.strip() for part in symbol.split("|")):
        try:
            found = contract.resolve(path)
        except (AttributeError, ImportError, LookupError):
            continue  # not on this torch
        if path.endswith("]"):
            table_path, op = path[:-1].split("[")
            table, packet = contract.resolve(table_path), getattr(torch.ops.aten, op.split(".")[-1])
            for key in [k for k in list(table) if k is packet or getattr(k, "overloadpacket", None) is packet]:
                patch.delitem(table, key)
            continue
        if (path in sys.modules and found is sys.modules[path]) or isinstance(found, ModuleSpec):
            patch.setattr(sys.modules[path], "__spec__", None)
            continue
        owner_path, name = path.rsplit(".", 1)
        owner = contract.resolve(owner_path)
        entry = _config_entry(owner, name)
        if entry is not None:
            patch.delitem(entry[0]._config, entry[1])
        elif isinstance(getattr(owner, "_config", None), dict):  # a function in a config module
            patch.delitem(vars(owner), name)
        elif isinstance(owner, type):
            for cls in owner.__mro__:
                if name in vars(cls):
                    patch.delattr(cls, name)
        else:
            patch.delattr(owner, name)


def _compiles_as_eager() -> bool:
    """A small model with an autotuned CPU GEMM of each kind (a frozen linear layer: ``packed_linear``; an
    mm of two inputs: a wrapped lowering), compiled by max-autotune afresh, against eager."""
    import torch._inductor.config as inductor_config

    torch.compiler.reset()
    torch.manual_seed(0)
    linear = torch.nn.Linear(32, 24).eval()

    def step(a, b):
        return (linear(a) + a @ b).relu()

    a, b = torch.randn(8, 32), torch.randn(32, 24)
    with torch.no_grad(), inductor_config.patch(freezing=True, fx_graph_cache=False):
        compiled = torch.compile(step, mode="max-autotune-no-cudagraphs")(a, b)
        return bool(torch.allclose(compiled, step(a, b), atol=1e-4))


CASES = [(hook.name, symbol) for hook in contract.HOOKS for symbol in hook.symbols]


@pytest.mark.parametrize("row, symbol", CASES, ids=[f"{row}:{symbol.split('.')[-1]}" for row, symbol in CASES])
def test_a_missing_symbol_turns_off_its_hook_alone(row, symbol, monkeypatch):
    """Real Inductor, the symbol taken away before the plugin installs: the plugin installs, the rows that
    use the symbol are off and named in one warning (installing again names them no more), every other row
    goes in; with the symbol back, a compile equals eager (nothing half put in)."""
    import ah_plugin
    from ah_plugin.inductor import adapter

    ah_plugin.uninstall()
    using = {hook.name for hook in contract.HOOKS if symbol in hook.symbols}
    assert row in using
    try:
        with monkeypatch.context() as gone, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gone.setattr(contract, "_said", set())
            _take_away(gone, symbol)
            off = adapter.install()
            adapter.install()
            ah_plugin.install(use=["mm"])
        assert set(off) == using, off
        named = [str(w.message) for w in caught if "lacks" in str(w.message)]
        assert len(named) == 1, named
        assert all(contract.BY_NAME[name].needs in named[0] for name in using), named[0]
        assert _compiles_as_eager()
    finally:
        ah_plugin.uninstall()


def test_a_row_that_fails_to_go_in_is_named_and_taken_out(monkeypatch):
    """An exception while one row goes in (a torch whose function has another shape than its signature
    says) costs that row only, named like a missing one."""
    import ah_plugin
    from ah_plugin.inductor import adapter
    from ah_plugin.inductor.patches import mode_options

    ah_plugin.uninstall()

    def breaks():
        raise TypeError("not what was checked")

    monkeypatch.setattr(mode_options, "install", breaks)
    monkeypatch.setattr(contract, "_said", set())
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            off = adapter.install()
        assert list(off) == ["mode_options"] and "could not be put in (TypeError" in off["mode_options"]
        assert any(contract.BY_NAME["mode_options"].needs in str(w.message) for w in caught)
        assert not hasattr(torch._inductor.list_mode_options, "__wrapped__")
    finally:
        ah_plugin.uninstall()


REACH = r'''
import json, torch
import torch._inductor.config as inductor_config
import ah_plugin
from ah_plugin.inductor import contract

inductor_config.freezing = True
linear = torch.nn.Linear(64, 48).eval()
x = torch.randn(32, 64)
with torch.no_grad():
    # fast mode: mode="max-autotune" narrowed, an mm with a C++ template offered, its lowering redone as off
    with ah_plugin.enabled(use=["mm"]):
        torch.compile(lambda a, b: (a @ b).relu(), mode="max-autotune-no-cudagraphs")(x, torch.randn(64, 16))
        torch.compiler.reset()
    # quality mode's options (persistent TMA offered); compiled lazily, so nothing runs here
    with ah_plugin.enabled(use=["mm"], top_k="quality"):
        torch.compile(linear, mode="max-autotune-no-cudagraphs")
    # top-k mode with the results cache tuning within limits: both candidates benchmarked, timings fed back
    with ah_plugin.enabled(use=["mm"], top_k=10):
        torch.compile(linear, mode="max-autotune-no-cudagraphs")(x)
print(json.dumps(dict(contract.reached)))
'''


@pytest.mark.slow
def test_a_real_cpu_compile_reaches_every_hook_the_cpu_path_has(tmp_path):
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), AH_TUNABLE_ENABLED="1",
                    AH_TUNABLE_FILENAME=str(tmp_path / "results.csv"), AH_TUNABLE_MAX_TUNING_DURATION_MS="5")
    done = subprocess.run([sys.executable, "-c", REACH], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reached = json.loads(done.stdout.strip().splitlines()[-1])
    unreached = [hook.name for hook in contract.HOOKS if hook.cpu_reachable and not reached.get(hook.name)]
    assert not unreached, f"hooks a CPU compile never reached: {unreached} (reached: {reached})"


def test_gpu_candidates_are_timed_by_the_plugins_replay_on_this_torch():
    """What a GPU autotuning in fast mode gets on this torch: Inductor's own switch for replay timing is
    honoured only under max_autotune, which fast mode's options leave off, so the plugin's replay must be
    what ``benchmarker.benchmark`` reaches for a CUDA candidate. On the CPU the replay itself cannot run:
    the call must fail inside the plugin's replay, which shows the route."""
    import traceback

    import torch._inductor.config as inductor_config
    from torch._inductor.runtime import benchmarking

    from ah_plugin.inductor.patches import benchmarker, mode_options
    from ah_plugin.replay_timing import METHOD_REPLAY

    options = mode_options.narrowed({"max_autotune": True, "coordinate_descent_tuning": True,
                                     "triton.cudagraphs": True}, {"gemm_only": True})
    assert not options.get("max_autotune")
    if hasattr(inductor_config, "autotune_cudagraph_benchmarking"):
        assert not (inductor_config.autotune_cudagraph_benchmarking and options.get("max_autotune"))

    class Candidate:
        def benchmark(self):
            return benchmarking.benchmarker.benchmark(lambda: None, device=torch.device("cuda"))

    candidate = Candidate()
    benchmarker.with_plan([candidate], benchmarker.Plan(timing=METHOD_REPLAY))
    try:
        with pytest.raises(Exception) as raised:
            candidate.benchmark()
        frames = [frame.filename for frame in traceback.extract_tb(raised.value.__traceback__)]
        assert any(name.endswith("ah_plugin/replay_timing.py") for name in frames), frames
    finally:
        benchmarker.uninstall()


def test_the_choices_handler_composes_with_other_handlers():
    """Torch 2.15 composes registered handlers; earlier torches build one class from the configured one.
    Either way the plugin's pre-codegen hook is the one Inductor runs, beside another handler's overrides."""
    from torch._inductor import choices as inductor_choices
    from torch._inductor.choices import InductorChoices

    import ah_plugin
    from ah_plugin.inductor import choices as plugin_choices

    class Other(InductorChoices):
        def uuid(self):
            return "other"

        def customize_fused_kernel_name(self, fused_name, src_code):
            return fused_name + "_other"

    registered = plugin_choices.has_registry()
    if registered:
        inductor_choices.register_inductor_choices("test_other_a", Other)
        inductor_choices.register_inductor_choices("test_other_b", Other)
    from ah_plugin.inductor import adapter

    installed_before = adapter.is_installed()  # an earlier test of this process may have switched it on
    try:
        with ah_plugin.enabled(use=["mm"]):
            assert plugin_choices.overriding_class() is None  # the plugin's hook is the one that runs
            assert "ah_plugin:" in str(torch._inductor.virtualized.V.choices.uuid())
            if registered:
                assert torch._inductor.virtualized.V.choices.customize_fused_kernel_name("k", "") == "k_other"
    finally:
        if registered:
            inductor_choices.unregister_inductor_choices("test_other_a")
            inductor_choices.unregister_inductor_choices("test_other_b")


def test_a_users_choices_handler_that_takes_the_plugins_hook_is_named():
    """A handler of the user's that runs its own ``_finalize_template_configs`` (set after the plugin, or listed
    before it by torch 2.15's composition) wins that hook: the plugin says so once, by the class's name, and
    the compile still equals eager (the plugin prunes at the selector call instead)."""
    from torch._inductor.choices import InductorChoices
    from torch._inductor.virtualized import V

    import ah_plugin

    class UsersChoices(InductorChoices):
        def _finalize_template_configs(self, *args, **kwargs):
            return super()._finalize_template_configs(*args, **kwargs)

        def uuid(self):
            return "users"

    with ah_plugin.enabled(use=["mm"]):
        previous = V.choices
        V.set_choices_handler(UsersChoices())
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert _compiles_as_eager()
                assert _compiles_as_eager()
        finally:
            V.set_choices_handler(previous)
    named = [str(w.message) for w in caught if "UsersChoices" in str(w.message)]
    assert len(named) == 1, named
    assert "runs its own _finalize_template_configs in place of the plugin's" in named[0]


def test_a_builtin_op_this_torch_dropped_is_named():
    """Torch 2.15's built-in AutoHeuristic has no mixed_mm: naming it must not be silently ignored."""
    from ah_plugin.config import settings
    from ah_plugin.inductor.patches import builtin_autoheuristic

    requested = settings.builtin_only_requested({settings.ENV_USE: "mm,mixed_mm", settings.ENV_COLLECT: "pad_mm"})
    assert requested == {"mixed_mm", "pad_mm"}
    dropped = tuple(int(part) for part in TORCH.split(".")) >= (2, 15)
    assert builtin_autoheuristic.builtin_lacks(requested) == (["mixed_mm"] if dropped else [])
