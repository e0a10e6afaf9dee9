"""The ``ah-plugin`` command and the older ``python -m torchgen_ah.<name>`` names: every tool is listed and
runs under the name it was started with, a misspelled tool is named with the closest one, every study
moved to ``torchgen_ah.evaluation.studies`` still runs under its previous name, and every ``python -m``
command the documents name resolves to a module."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import torchgen_ah  # noqa: F401 - puts the finder for the older names in place
from ah_plugin.report import console

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "ah-plugin"


def test_the_listing_names_every_tool(capsys):
    assert console.main(["--help"]) == 0
    listing = capsys.readouterr().out
    for name, tool in console.TOOLS.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(tool.summary)}$", listing, re.M), name
    assert console.main([]) == 2  # no tool named: the listing, and a failing exit


@pytest.mark.parametrize("name", [n for n in console.TOOLS if n != "eval-worker"])
def test_a_tools_help_names_it_as_run(name, capsys):
    with pytest.raises(SystemExit) as done:
        console.main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: ah-plugin {name}")


def test_a_misspelled_tool_is_named_with_the_closest(capsys):
    assert console.main(["merge-dta", "a.txt"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ah-plugin: error: no tool 'merge-dta' (did you mean 'merge-data'?); ah-plugin --help lists them")


def test_the_older_names_run_the_same_main():
    for old, module in console.OLD_NAMES.items():
        aliased, real = importlib.import_module(old), importlib.import_module(module)
        assert aliased.__file__ == real.__file__, old
        if hasattr(real, "main"):
            assert aliased.main.__code__.co_filename == real.main.__code__.co_filename, old


def test_every_study_moved_to_its_package_resolves_under_its_previous_name():
    studies = REPO / "torchgen_ah" / "evaluation" / "studies"
    for name in console.STUDIES:
        old, new = f"torchgen_ah.evaluation.{name}", f"torchgen_ah.evaluation.studies.{name}"
        assert not (studies.parent / f"{name}.py").exists(), f"{name} is in both packages"
        assert console.OLD_NAMES[old] == new
        spec = importlib.util.find_spec(old)
        assert spec is not None and spec.name == old, old
        assert Path(spec.origin) == studies / f"{name}.py"


@pytest.mark.parametrize("old", ["torchgen_ah.evaluation.step_profile", "torchgen_ah.evaluation.fast_heldout"])
def test_a_studys_previous_name_runs_as_before(old):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", old, "--help"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: python -m {old.replace('evaluation.', 'evaluation.studies.')}")


def documented_modules() -> set[str]:
    """Every module a document or job script runs with ``python -m`` (or ``torchrun ... -m``)."""
    files = [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("benchmarks/*.md"), *REPO.glob("gpu_jobs/*.sh"),
             *REPO.glob("datasets/**/README.md")]
    found = set()
    for path in files:
        found |= set(re.findall(r"\s-m ((?:torchgen_ah|ah_plugin)(?:\.\w+)+)", path.read_text()))
    return found


def test_every_documented_python_m_command_resolves():
    names = documented_modules()
    assert {"torchgen_ah.compile_cost", "torchgen_ah.mm.train_decision_mm", "ah_plugin.demo"} <= names
    missing = sorted(name for name in names if importlib.util.find_spec(name) is None)
    assert missing == []


def test_an_older_name_runs_as_before():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "torchgen_ah.merge_data", "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: python -m torchgen_ah.merge_data")


@pytest.mark.skipif(not SCRIPT.exists(), reason="the ah-plugin script is installed by `pip install`; "
                    "this package is only on the path")
def test_the_installed_script_runs_a_tool(tmp_path):
    done = subprocess.run([str(SCRIPT), "merge-data", str(tmp_path / "out.txt"), str(tmp_path / "missing.txt")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"ah-plugin merge-data: error: {tmp_path / 'missing.txt'}")


def test_output_cut_short_by_its_reader_ends_quietly():
    """``ah-plugin -h | head -1``, and a tool's help the same way: the reader closes the pipe before the
    command has written everything; the command ends without a traceback."""
    for args in (["-h"], ["merge-data", "-h"]):
        for _ in range(3):  # the reader's close races the writes: a few tries
            proc = subprocess.Popen([sys.executable, "-m", "ah_plugin.report.console", *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            proc.stdout.close()  # the reader is gone before the first line
            err = proc.stderr.read().decode()
            proc.wait(timeout=120)
            assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_the_zoo_runs_as_a_tool(capsys):
    """The README quotes the zoo: it runs as ``ah-plugin zoo`` too."""
    assert console.TOOLS["zoo"].target == "torchgen_ah.evaluation.zoo:main"
    assert console.main(["zoo", "--list"]) == 0
    assert "resnet50" in capsys.readouterr().out
