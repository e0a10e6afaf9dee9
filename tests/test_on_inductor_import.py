"""Switching on from the environment imports nothing of Inductor at ``import torch``; the hooks are in
before any compile, whichever way Inductor is first imported. Each case is a fresh interpreter switched on
by the environment alone, through the installed entry point (real torch, real imports, no compile)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import sys, threading
import torch, ah_plugin
assert "torch._inductor" not in sys.modules and "ah_plugin.inductor.adapter" not in sys.modules, "imported at import torch"
status = ah_plugin.status()
assert status["installed"] and status["waiting_for_inductor"] and status["policies"] == [], status
FIRST_USE
adapter = sys.modules["ah_plugin.inductor.adapter"]
assert adapter.is_installed() and not ah_plugin.status()["waiting_for_inductor"]
assert hasattr(torch._inductor.list_mode_options, "__wrapped__"), "mode options not wrapped"
print("policies", ah_plugin.status()["policies"])
"""

FIRST_USES = {
    # torch.compile imports Dynamo, which imports Inductor half-way through its own import
    "torch.compile": 'compiled = torch.compile(lambda x: x.relu(), mode="max-autotune")',
    "config import": "import torch._inductor.config",
    "attribute": "torch._inductor.config.freezing = True",
    "the adapter": "from ah_plugin.inductor import adapter",
    "dynamo": "import torch._dynamo",
    "another thread": "t = threading.Thread(target=lambda: __import__('torch._inductor.config')); t.start(); t.join()",
}


def fresh(code: str, **variables) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env.update(variables)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("first_use", sorted(FIRST_USES))
def test_the_hooks_go_in_when_inductor_is_first_imported(first_use):
    done = fresh(PROBE.replace("FIRST_USE", FIRST_USES[first_use]), TORCHINDUCTOR_AUTOHEURISTIC_USE="mm",
                 AH_PLUGIN_VERBOSE="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "policies ['RankingPolicy']" in done.stdout
    if first_use == "torch.compile":  # torch.compile itself read the mode's options through the hook
        assert "mode='max-autotune' autotunes GEMMs only" in done.stderr, done.stderr[-3000:]


def test_the_hooks_leave_the_cuda_graph_trees_to_torch():
    """Inductor first imported in a worker thread: the hooks go in there, and they import nothing of the
    CUDA-graph trees, whose import in a thread other than the main one aborted the process at exit in about
    one run of six ("terminate called without an active exception"); torch imports them itself for a
    compile with CUDA graphs. The contract's probe of their symbols waits for that import."""
    code = ("import sys, threading, torch, ah_plugin\n"
            "t = threading.Thread(target=lambda: __import__('torch._inductor.config')); t.start(); t.join()\n"
            "from ah_plugin.inductor import contract\n"
            "assert ah_plugin.status()['installed']\n"
            "assert contract.check()['graph_trees_stream'] is None\n"
            "print('trees', 'torch._inductor.cudagraph_trees' in sys.modules)\n"
            "import torch._inductor.cudagraph_trees\n"
            "print('probed', contract.probe(contract.BY_NAME['graph_trees_stream']))\n")
    done = fresh(code, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trees False" in done.stdout and "probed None" in done.stdout  # once imported, probed and present


def test_switched_off_before_inductor_nothing_goes_in():
    code = ("import sys, torch, ah_plugin; ah_plugin.uninstall(); import torch._inductor.config; "
            "print('adapter' if 'ah_plugin.inductor.adapter' in sys.modules else 'none', ah_plugin.status()['installed'])")
    done = fresh(code, TORCHINDUCTOR_AUTOHEURISTIC_USE="mm")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["none", "False"]


def test_a_verbose_run_that_never_compiles_says_so():
    done = fresh("import torch", TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", AH_PLUGIN_VERBOSE="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "at exit: nothing compiled (torch never imported Inductor)" in done.stderr


# The plugin's own API used before `import torch`, with a plugin variable set: the adapter's import brings in
# torch, whose entry point starts waiting for Inductor while the adapter is still half imported.
BEFORE_TORCH = {
    "the results cache's switch": ("import ah_plugin.tunable as tunable; tunable.enable(True)",
                                   {"AH_TUNABLE_ENABLED": "1"}, "TunableCachePolicy"),
    "install": ("import ah_plugin; ah_plugin.install(use='mm')", {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"},
                "RankingPolicy"),
}


@pytest.mark.parametrize("case", sorted(BEFORE_TORCH))
def test_the_plugins_api_before_import_torch_switches_it_on(case):
    first, variables, policy = BEFORE_TORCH[case]
    code = (f"import warnings; warnings.simplefilter('always')\n{first}\n"
            "import torch, ah_plugin\ncompiled = torch.compile(lambda x: x.relu())\n"
            "status = ah_plugin.status()\nprint('installed', status['installed'], 'policies', status['policies'])")
    done = fresh(code, **variables)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not activated" not in done.stderr and "unavailable" not in done.stderr, done.stderr[-3000:]
    assert "installed True" in done.stdout and policy in done.stdout, done.stdout + done.stderr[-2000:]
