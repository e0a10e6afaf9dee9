"""What ``pip install`` brings: the plugin needs torch alone, the offline tools' packages come with the
``tools`` extra. Real imports in a fresh interpreter where those packages cannot be imported, and pip's own
resolution of the project's requirements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS_PACKAGES = ("numpy", "pandas", "sklearn", "scipy", "tqdm")

# Every module of ah_plugin imported, and one model compiled with USE=mm on, where none of the tools'
# packages can be imported (as after `pip install .` into an environment holding torch alone).
WITHOUT_TOOLS = r"""
import importlib, pkgutil, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # Python's own "not importable": import raises, find_spec answers None
import warnings
warnings.simplefilter("ignore")  # torch says once that it found no numpy
import torch
import ah_plugin
names = [info.name for info in pkgutil.walk_packages(ah_plugin.__path__, "ah_plugin.")]
for name in names:
    importlib.import_module(name)
print(len(names), "modules")
if sys.argv[2] == "compile":
    torch._inductor.config.freezing = True
    model = torch.nn.Linear(16, 8).eval()
    with torch.no_grad():
        compiled = torch.compile(model, mode="max-autotune")
        x = torch.randn(4, 16)
        assert torch.allclose(compiled(x), model(x), atol=1e-4)
    assert ah_plugin.status()["use_stats"].autotunings == 1, ah_plugin.status()
    print("compiled")
"""


def _without_tools(what: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_TOOLS, ",".join(TOOLS_PACKAGES), what],
                          capture_output=True, text=True, cwd=REPO, timeout=600, env=env or None)


def test_the_plugin_imports_none_of_the_tools_packages():
    done = _without_tools("import")
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[0]) > 40


def test_the_demo_asks_for_the_tools_extra_before_it_starts():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "from ah_plugin import demo; sys.exit(demo.main([]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "python -m ah_plugin.demo: error: needs sklearn, part of the tools extra: pip install 'ah-plugin[tools]'"


@pytest.mark.slow
def test_the_plugin_compiles_without_the_tools_packages(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "AH_PLUGIN_", "AH_TUNABLE_"))}
    env.update(TORCHINDUCTOR_AUTOHEURISTIC_USE="mm", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    done = _without_tools("compile", **env)
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]


@pytest.mark.slow
def test_pip_install_brings_torch_alone_and_the_tools_extra_the_rest(tmp_path):
    """pip's resolution of the project into an empty target, as a fresh environment would get it."""

    def resolved(requirement: str) -> set[str]:
        report = tmp_path / "report.json"
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                               "--report", str(report), requirement], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}

    plain = resolved(str(REPO))
    assert {"ah-plugin", "torch"} <= plain
    assert plain.isdisjoint({"numpy", "pandas", "scikit-learn", "scipy", "tqdm"}), sorted(plain)
    tools = resolved(f"{REPO}[tools]")
    assert {"numpy", "pandas", "scikit-learn", "tqdm"} <= tools
