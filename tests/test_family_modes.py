"""The study of the plugin's modes on the map's workloads: its report against the bars, read from a real
JSON-lines file through its command line, and what it says where it cannot run (no GPU here: the
measurement itself runs on the device machine, gpu_jobs/family_loop.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from torchgen_ah.evaluation.studies import family_modes as fm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def row(family, label, **modes):
    """A measured row: mode -> (step x off, compile s); off's compile is 10 s."""
    out = {"family": family, "label": label, "failures": {}, "modes": {"off": {"x_off": 1.0, "compile_s": 10.0,
                                                                                "compile_x_off": 1.0}}}
    for mode, (x_off, compile_s) in modes.items():
        out["modes"][mode] = {"x_off": x_off, "compile_s": compile_s, "compile_x_off": compile_s / 10.0}
    return out


def test_quality_keeps_a_share_of_defaults_gain_and_none_where_default_gains_nothing():
    assert fm.gain_kept(0.91, 0.90) == pytest.approx(0.9)
    assert fm.gain_kept(1.0, 0.8) == pytest.approx(0.0)
    assert fm.gain_kept(0.95, 1.02) is None  # default slower than off: no gain to keep


def test_the_bars_judge_every_shape_for_fast_and_the_geomean_and_compile_for_quality():
    rows = [row("int_mm", "decode", default=(0.80, 60), fast=(1.000, 11), quality=(0.82, 12)),
            row("int_mm", "prefill", default=(0.90, 80), fast=(1.004, 11), quality=(0.905, 12)),
            {"family": "int_mm", "label": "big", "skipped": "budget of 150 s"}]
    figures = fm.family_figures(rows)
    assert figures["shapes"] == 2 and figures["not_measured"] == 1
    fast, quality = figures["modes"]["fast"], figures["modes"]["quality"]
    assert fast["worst_x_off"] == 1.004 and fast["meets_bar"]
    assert quality["compile_x_off"] == pytest.approx(1.2) and quality["meets_bar"]
    assert quality["gain_kept"] == pytest.approx((1 - (0.82 * 0.905) ** 0.5) / (1 - (0.80 * 0.90) ** 0.5))

    slow = fm.family_figures([row("int_mm", "decode", default=(0.80, 60), fast=(1.006, 11), quality=(0.82, 14))])
    assert not slow["modes"]["fast"]["meets_bar"]  # one shape 0.6% slower than off
    assert not slow["modes"]["quality"]["meets_bar"]  # 1.4x off's compile

    failed = row("int_mm", "decode", default=(0.80, 60), fast=(1.0, 11))
    failed["failures"] = {"quality": "RuntimeError: no kernel"}
    figures = fm.family_figures([failed])
    assert figures["modes"]["fast"]["meets_bar"]
    # quality failed on its only shape: still in the report, and its bar missed
    assert figures["modes"]["quality"]["shapes"] == 0 and figures["modes"]["quality"]["failed"] == 1
    assert figures["modes"]["quality"]["meets_bar"] is False

    slow_compile = fm.family_figures([row("int_mm", "decode", default=(0.80, 60), fast=(1.0, 14))])
    assert not slow_compile["modes"]["fast"]["meets_bar"]  # 1.4x off's compile


def test_a_killed_compile_worker_is_a_compile_row_and_partial_fresh_compiles_are_not_mixed():
    rows = [row("int_mm", "a", default=(0.8, 60), fast=(1.0, 11)), row("int_mm", "b", default=(0.8, 60), fast=(1.0, 11)),
            {"family": "int_mm", "label": "a", "kind": fm.FRESH_COMPILE, "mode": "off", "compile_s": 5.0},
            {"family": "int_mm", "label": "a", "kind": fm.FRESH_COMPILE, "mode": "fast", "compile_s": 5.5},
            {"family": "int_mm", "label": "(the rest)", "kind": fm.FRESH_COMPILE, "mode": "fast",
             "error": "worker killed after 90 s"}]
    figures = fm.family_figures(rows)
    assert figures["shapes"] == 2 and figures["not_measured"] == 0  # the killed worker is no missing shape
    # shape b has no fresh compile: both shapes' one-process ratios (1.1x), marked, never 1.1 x 1.1 mixed
    fast = figures["modes"]["fast"]
    assert fast["compile_in_one_process"] and fast["compile_x_off"] == pytest.approx(1.1)


def test_the_report_reads_a_run_and_writes_its_section_with_the_command(tmp_path):
    run = tmp_path / "modes_int_mm.jsonl"
    fresh = [{"family": "int_mm", "label": "decode", "kind": fm.FRESH_COMPILE, "mode": mode, "compile_s": seconds}
             for mode, seconds in (("off", 8.0), ("fast", 9.6), ("quality", 12.0))]
    run.write_text("\n".join(json.dumps(r) for r in [
        row("int_mm", "decode", default=(0.80, 60), fast=(1.0, 11), quality=(0.82, 12)), *fresh,
        row("flex_decoding", "2k cache", default=(0.45, 40), fast=(0.5, 12), quality=(0.46, 20)),
    ]) + "\n", encoding="utf-8")
    results = tmp_path / "RESULTS.md"
    results.write_text("# Results\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.family_modes", "--report", str(run),
                           "--results", str(results), "--command", "the command"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = results.read_text(encoding="utf-8")
    assert "<!-- BEGIN family_modes -->" in text and "Command: `the command`" in text
    # int_mm's compile from its fresh processes (9.6 / 8 s), not from the one process's 11 / 10 s
    assert "| int_mm | fast | 1 | 1.000 (1.000) | 1.20 | - | met |" in text
    assert "| int_mm | quality | 1 | 0.820 (0.820) | 1.50 | 90% | **missed** |" in text  # its compile
    # no fresh process measured flex_decoding's compiles: the one process's, marked
    assert "| flex_decoding | quality | 1 | 0.460 (0.460) | 2.00* | 98% | **missed** |" in text


@pytest.mark.parametrize("argv, said", [
    (["--modes", "fast,turbo", "--families", "int_mm", "--out", "x"], "unknown modes turbo"),
    (["--families", "int_mm,int4_mm", "--out", "x"], "unknown families int4_mm"),
    (["--families", "int_mm"], "--out and --families are needed"),
    (["--families", "int_mm", "--out", "x", "--artifact-dir", "no/such/folder"], "no such folder"),
    (["--families", "int_mm", "--out", "x", "--rounds", "0"], "at least 1 round"),
    (["--compile-worker", "int_mm", "--out", "x"], "--compile-mode must be off"),
    (["--report", "no/such/modes.jsonl"], "no/such/modes.jsonl: No such file or directory"),
])
def test_bad_arguments_are_refused_in_one_line(argv, said):
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.family_modes", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_a_report_on_a_line_that_is_not_json_names_the_file_and_line(tmp_path):
    rows = tmp_path / "modes.jsonl"
    rows.write_text('{"family": "int_mm", "label": "a"}\n{not json\n')
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.family_modes", "--report", str(rows)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"{rows}:2: not a JSON line" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="on a GPU the worker measures instead")
def test_a_worker_without_a_gpu_says_so(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.evaluation.studies.family_modes", "--worker", "int_mm",
                           "--out", str(tmp_path / "rows.jsonl")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr, proc.stderr[-2000:]
