"""benchmarks/compile_once.py without a GPU: the table of saved reports, its input checks, the Triton
cache count, and its refusal to measure."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "compile_once.py")
SAVED = os.path.join(REPO, "tests", "data", "compile_once_4_templates.jsonl")
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import compile_once  # noqa: E402


def _run(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES="", **(env or {})))


def test_the_saved_h200_reports_tabulate_medians_per_variant():
    proc = _run("--from-json", SAVED, "--no-write")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["fast"][:4] == ["2", "1.46", "4", "0"]  # four templates compiled once each
    assert rows["fast_twice"][:4] == ["2", "2.59", "4", "4"]  # and each a second time without compile-once
    assert rows["off"][:4] == ["2", "0.74", "0", "0"]


def test_a_bad_report_is_named_by_file_and_line(tmp_path):
    bad = tmp_path / "reports.jsonl"
    good = open(SAVED, encoding="utf-8").readline()
    bad.write_text(good + json.dumps({"variant": "fast", "rep": 0}) + "\n", encoding="utf-8")
    proc = _run("--from-json", str(bad), "--no-write")
    assert proc.returncode == 2 and f"{bad}:2: a compile_once report needs" in proc.stderr
    bad.write_text(good + "{not json\n", encoding="utf-8")
    proc = _run("--from-json", str(bad), "--no-write")
    assert proc.returncode == 2 and f"{bad}:2: not a JSON line" in proc.stderr


def test_without_a_gpu_it_says_so_and_bad_shapes_are_named(tmp_path):
    out = tmp_path / "reports.jsonl"
    proc = _run("--reps", "1", "--json", str(out), "--no-write")
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr
    assert not out.exists()
    proc = _run("--shapes", "128x768", "--no-write")
    assert proc.returncode == 2 and "bad shape '128x768'" in proc.stderr


def test_triton_binaries_are_counted_by_kernel_name(tmp_path):
    """Triton's cache holds one folder per compiled kernel with ``<name>.json`` (and a ``__grp__`` index)."""
    for folder, name in (("a1", "triton_mm"), ("a2", "triton_mm"), ("b", "triton_tem_fused_mm_0"),
                         ("c", "triton_poi_fused_add_0")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{name}.json").write_text("{}")
        (tmp_path / folder / f"__grp__{name}.json").write_text("{}")
    kernels = compile_once.triton_kernels(str(tmp_path))
    assert kernels == {"triton_mm": 2, "triton_tem_fused_mm_0": 1, "triton_poi_fused_add_0": 1}
    assert compile_once.template_counts(kernels) == {"benchmark_binaries": 2, "graph_template_binaries": 1}
