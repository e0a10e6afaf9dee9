"""The command lines as a user meets them: help that names the command and documents every option, and bad
input ending in one line that names the file, the line and what is wrong (real subprocesses, real files)."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from unittest import mock

import pytest

from ah_plugin.collect.log_format import format_metadata
from torchgen_ah.training.output_folder import package_folder

REPO = Path(__file__).resolve().parents[1]
# module -> how the user runs it (the prog its --help must name)
COMMANDS = {
    "torchgen_ah.merge_data": "python -m torchgen_ah.merge_data",
    "torchgen_ah.get_mm_dataset": "python -m torchgen_ah.get_mm_dataset",
    "torchgen_ah.train_generic": "python -m torchgen_ah.train_generic",
    "torchgen_ah.mm.train_decision_mm": "python -m torchgen_ah.mm.train_decision_mm",
    "torchgen_ah.mm.gen_data_mm": "python -m torchgen_ah.mm.gen_data_mm",
    "torchgen_ah.model_shapes": "python -m torchgen_ah.model_shapes",
    "torchgen_ah.model_gemms": "python -m torchgen_ah.model_gemms",
    "torchgen_ah.evaluate": "python -m torchgen_ah.evaluate",
    "torchgen_ah.compile_cost": "python -m torchgen_ah.compile_cost",
    "torchgen_ah.e2e_models": "python -m torchgen_ah.e2e_models",
    "ah_plugin.demo": "python -m ah_plugin.demo",
}
PL_META = {"shared_memory": 0, "device_capa": [0, 0], "name": "packed_linear",
           "numerical_features": ["in0_size_0", "in0_size_1"], "categorical_features": []}


class _Parsed(Exception):
    pass


def parser_of(module: str) -> argparse.ArgumentParser:
    """The parser a command's ``main`` builds (caught at ``parse_args``; nothing runs)."""
    main = getattr(importlib.import_module(module), "main")
    seen = []

    def grab(self, *args, **kwargs):
        seen.append(self)
        raise _Parsed

    with mock.patch.object(argparse.ArgumentParser, "parse_args", grab), pytest.raises(_Parsed):
        main([])
    return seen[0]


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_help_names_the_command_and_documents_every_option(module):
    parser = parser_of(module)
    assert parser.prog == COMMANDS[module]
    undocumented = [a.option_strings or a.dest for a in parser._actions
                    if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS and not a.help]
    assert undocumented == [], undocumented


def test_gen_data_mm_help_groups_options_and_shows_defaults():
    text = parser_of("torchgen_ah.mm.gen_data_mm").format_help()
    assert text.startswith("usage: python -m torchgen_ah.mm.gen_data_mm")
    for group in ("what to measure", "mm inputs and timing", "workers and devices", "time limits",
                  "several hosts (torchrun)"):
        assert group in text, group
    assert "(default: 30.0)" in text and "--stop-grace-seconds" in text
    assert "default: cuda when this machine has an NVIDIA GPU, else cpu" in " ".join(text.split())


def _run(module: str, *args, cwd=REPO):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def _last_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return lines[-1]


def _packed_linear_log(path: Path) -> Path:
    rows = ["8,16,extern__mkl_linear,0.3", "8,16,cpp_CppMicroGemmFP32Vec_bm8_bn16_bk1,0.2",
            "64,16,extern__mkl_linear,0.4", "64,16,cpp_CppMicroGemmFP32Vec_bm8_bn16_bk1,0.6"]
    path.write_text(format_metadata(PL_META) + "\nin0_size_0,in0_size_1,choice,feedback\n" + "\n".join(rows) + "\n")
    return path


@pytest.fixture
def bad_inputs(tmp_path):
    """A zip passed as a log, a shapes file with a bad line, a non-mm log."""
    archive = tmp_path / "h100_mm.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("h100/h100_mm.txt", "not much\n")
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,k,n\n64,64,64\n64,x,64\n")
    return {"zip": archive, "shapes": shapes, "packed_linear": _packed_linear_log(tmp_path / "pl.txt")}


@pytest.mark.parametrize("module, args, expected", [
    ("torchgen_ah.mm.train_decision_mm", ["{packed_linear}", "--heuristic-name", "X"],
     "python -m torchgen_ah.mm.train_decision_mm: error: {packed_linear}:1: a 'packed_linear' log, not an mm log (no m, k, n columns); "
     "train it with `python -m torchgen_ah.train_generic {packed_linear} --heuristic-name NAME`"),
    ("torchgen_ah.mm.train_decision_mm", ["{zip}", "--heuristic-name", "X"],
     "python -m torchgen_ah.mm.train_decision_mm: error: {zip}:1: a zip archive, not an AutoHeuristic log: unpack it first"),
    ("torchgen_ah.train_generic", ["{tmp}/missing.txt", "--heuristic-name", "X"],
     "python -m torchgen_ah.train_generic: error: {tmp}/missing.txt: No such file or directory"),
    ("torchgen_ah.merge_data", ["{tmp}/out.txt", "{zip}"], "python -m torchgen_ah.merge_data: error: {zip}:1: a zip archive"),
    ("torchgen_ah.mm.gen_data_mm", ["--device", "cpu", "--shapes", "{shapes}", "-o", "{tmp}/o.txt", "--no-progress"],
     "python -m torchgen_ah.mm.gen_data_mm: error: {shapes}:3: m, k, n must be integers: 64,x,64"),
    ("torchgen_ah.mm.gen_data_mm", ["--device", "cpu", "--shapes", "{zip}", "-o", "{tmp}/o.txt", "--no-progress"],
     "python -m torchgen_ah.mm.gen_data_mm: error: {zip}:1: a zip archive, not a shapes file"),
    ("torchgen_ah.evaluate", ["{zip}", "--out", "{tmp}/ev"], "python -m torchgen_ah.evaluate: error: {zip}:1: a zip archive, not a shapes file"),
    ("torchgen_ah.compile_cost", ["{shapes}", "--out", "{tmp}/cc"], "python -m torchgen_ah.compile_cost: error: {shapes}:2: missing op, dtype, layout"),
])
def test_bad_input_ends_in_one_line_naming_file_and_line(tmp_path, bad_inputs, module, args, expected):
    names = {**{k: str(v) for k, v in bad_inputs.items()}, "tmp": str(tmp_path)}
    result = _run(module, *[a.format(**names) for a in args])
    assert result.returncode != 0
    assert _last_line(result).startswith(expected.format(**names)), result.stderr[-2000:]


def test_trainer_writes_to_the_current_folder_and_never_silently_into_the_package(tmp_path, bad_inputs):
    log = bad_inputs["packed_linear"]
    made = _run("torchgen_ah.train_generic", log, "--heuristic-name", "PLMine", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "_PLMine.py").is_file() and "wrote ./_PLMine.py" in made.stdout
    package = package_folder()
    before = sorted(os.listdir(package))
    for module in ("torchgen_ah.train_generic", "torchgen_ah.mm.train_decision_mm"):
        refused = _run(module, log, "--heuristic-name", "PLMine", "--out", package, cwd=tmp_path)
        assert refused.returncode != 0
        assert f"--out {package} is the installed package's artifact folder" in _last_line(refused)
        assert "Pass --into-package to write there on purpose" in _last_line(refused)
    both = _run("torchgen_ah.train_generic", log, "--heuristic-name", "PLMine", "--into-package", "--out", tmp_path)
    assert both.returncode != 0 and f"--into-package writes into {package}" in _last_line(both)
    assert sorted(os.listdir(package)) == before  # nothing written there


def test_the_generators_default_device_is_what_the_machine_has():
    from torchgen_ah.datagen import distributed

    gpu = any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev"))
    assert distributed.default_device({}) == ("cuda" if gpu else "cpu")
    assert distributed.default_device({"CUDA_VISIBLE_DEVICES": ""}) == "cpu"


def test_a_zip_is_named_at_line_1_whatever_its_header_bytes(tmp_path):
    """A zip's header holds its members' DOS timestamps; at some times of day one of those bytes is a
    newline. The error still names line 1: the file is a zip from its first bytes."""
    from torchgen_ah.data.text_input import read_text

    archive = tmp_path / "h100_mm.zip"
    with zipfile.ZipFile(archive, "w") as z:  # 20:00:20 puts a newline byte into the local header
        z.writestr(zipfile.ZipInfo("h100/h100_mm.txt", date_time=(2026, 12, 1, 20, 0, 20)), "not much\n")
    assert b"\n" in archive.read_bytes()[:16]
    with pytest.raises(ValueError, match=r"h100_mm\.zip:1: a zip archive, not a shapes file$"):
        read_text(archive)
    binary = tmp_path / "shapes.bin"
    binary.write_bytes(b"m,k,n\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"shapes\.bin:2: not UTF-8 text \(a binary file\?\), not a shapes file$"):
        read_text(binary)


def test_a_heuristic_name_that_is_no_python_class_name_is_refused_before_training(tmp_path, bad_inputs):
    """``--heuristic-name my-ranking`` would write ``class my-ranking:``, which no program can load: refused
    in one line that says what to use instead, nothing written."""
    from torchgen_ah.training.codegen import heuristic_name_problem

    refused = _run("torchgen_ah.train_generic", bad_inputs["packed_linear"], "--heuristic-name", "my-ranking",
                   cwd=tmp_path)
    assert refused.returncode == 2
    assert _last_line(refused) == (
        "python -m torchgen_ah.train_generic: error: argument --heuristic-name: 'my-ranking' is not a Python class "
        "name (letters, digits and _, not starting with a digit, not a keyword); the artifact is class NAME in "
        "_NAME.py: try 'my_ranking'")
    assert not list(tmp_path.glob("_*.py"))
    for name, fixed in (("2fast", "_2fast"), ("class", "class_"), ("My Ranking", "My_Ranking")):
        assert heuristic_name_problem(name).endswith(f"try {fixed!r}")
    assert heuristic_name_problem("MyRanking") is None
