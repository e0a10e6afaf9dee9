"""The compile profile study: modes compiled in one process with Inductor's whole-graph caches off (so a
control compiled after off lowers its graph again), profiled modes written, and the functions one mode spent
more time in than another listed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from torchgen_ah.evaluation.studies import compile_profile


def test_extra_time_lists_only_the_functions_the_second_spent_longer_in_largest_first():
    first = {"a": 1.0, "b": 2.0, "c": 0.5}
    second = {"a": 1.5, "b": 1.0, "c": 0.5, "d": 0.2}
    assert compile_profile.extra_time(first, second) == [("a", 1.0, 1.5), ("d", 0.0, 0.2)]
    assert compile_profile.extra_time(first, second, top=1) == [("a", 1.0, 1.5)]


def test_the_phase_table_gives_each_modes_seconds_per_phase_and_the_last_over_the_one_before():
    before = {"compile_fx_inner": 1.0, "async_compile.wait": 0.5}
    after = {"compile_fx_inner": 3.5, "async_compile.wait": 0.5, "Scheduler.codegen": 0.8}
    assert compile_profile.phase_delta(before, after) == {"compile_fx_inner": 2.5, "Scheduler.codegen": 0.8}
    table = compile_profile.phase_table({"off_again": {"compile_fx_inner": 2.0, "tiny": 0.01},
                                         "fast": {"compile_fx_inner": 2.5, "Scheduler.codegen": 0.8}})
    lines = table.splitlines()
    assert lines[0] == "| phase | off_again s | fast s | fast - off_again s |"
    assert lines[2] == "| compile_fx_inner | 2.000 | 2.500 | +0.500 |"  # the largest phase first
    assert lines[3] == "| Scheduler.codegen | 0.000 | 0.800 | +0.800 |"  # a phase one mode never entered
    assert "tiny" not in table  # under the floor in every mode
    # fast before the control: still fast's seconds over the control's, beside every mode's
    turned = compile_profile.phase_table({"off": {"compile_fx_inner": 9.0}, "fast": {"compile_fx_inner": 2.5},
                                          "off_again": {"compile_fx_inner": 2.0}}).splitlines()
    assert turned[0] == "| phase | off s | fast s | off_again s | fast - off_again s |"
    assert turned[2] == "| compile_fx_inner | 9.000 | 2.500 | 2.000 | +0.500 |"


def test_bad_arguments_are_named(capsys):
    for argv, words in ((["--model", "nope"], "unknown model 'nope'"),
                        (["--model", "tiny_mlp", "--modes", "off,off"], "--modes: each once"),
                        (["--model", "tiny_mlp", "--modes", "off,fast", "--profile", "quality"],
                         "--profile names modes not in --modes: quality")):
        with pytest.raises(SystemExit):
            compile_profile.main(argv)
        assert words in capsys.readouterr().err


@pytest.mark.slow
def test_a_control_compiled_after_off_lowers_its_graph_again_and_the_diff_is_written(tmp_path):
    """Real CPU compiles of the tiny decoder: off, then off_again and fast under cProfile."""
    run = subprocess.run(
        [sys.executable, "-m", "torchgen_ah.evaluation.studies.compile_profile", "--model", "tiny_decoder",
         "--device", "cpu", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| off_again |" in run.stdout and "| fast |" in run.stdout
    assert run.stdout.count("| 1 | yes |") == 3  # one graph each; fast kept aten on the CPU: off's very code
    control = (tmp_path / "tiny_decoder_off_again.txt").read_text()
    assert "(fx_codegen_and_compile)" in control  # lowered and generated again, not a whole-graph cache hit
    diff = (tmp_path / "tiny_decoder_diff.txt").read_text()
    assert diff.startswith("cumulative seconds, fast over off_again") and "own seconds, fast over off_again" in diff
    phases = (tmp_path / "tiny_decoder_phases.txt").read_text()
    assert "| phase | off s | off_again s | fast s | fast - off_again s |" in phases
    assert "| fx_codegen_and_compile |" in phases  # Inductor's own timer, per mode
    assert not [p for p in os.listdir(tmp_path) if p.startswith("compile_profile_caches_")]  # its caches removed
