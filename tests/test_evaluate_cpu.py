"""The evaluator end to end on the CPU path: freezing + ``x @ self.w`` under no_grad lowers to
``packed_linear`` with two real choices (MKL and the C++ GEMM template), timed by the real worker through the
plugin's collector, then tabled, scored, reported and plotted."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from torchgen_ah.evaluation.evaluate import ShapesError, read_shapes, update_results_section
from torchgen_ah.evaluation.policies import fixed_policy, score_policies
from torchgen_ah.evaluation.timing_table import EvaluationTimingTable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_cpu_run_tables_both_choices_and_scores_from_the_same_table(tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,m,k,n,batch,dtype,layout\npacked_linear,16,64,48,1,float32,NN\n")
    out = tmp_path / "run"
    results = tmp_path / "RESULTS.md"
    results.write_text("# Results\n\n<!-- BEGIN evaluate_gpu -->\nold\n<!-- END evaluate_gpu -->\ntail\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-m", "torchgen_ah.evaluate", str(shapes), "--out", str(out), "--reps", "2",
         "--device", "cpu", "--results", str(results)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=170,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]

    table = EvaluationTimingTable.load(out / "timing" / "packed_linear")
    (key,) = table.inputs()
    times = table.times(key)
    assert len(times) == 2 and "extern__mkl_linear" in times
    assert any(c.startswith("cpp_") for c in times)
    frame = table.frame.set_index("choice")
    assert (frame["reps"] == 3).all()  # one default-space autotuning + two repetitions, one process
    assert frame["in_default"].all()
    assert table.first_pick[key] in times

    # a policy that keeps only the slower choice: regret = slower / faster, from this same table
    slower = max(times, key=times.get)
    faster = min(times, key=times.get)
    per_input = score_policies(table, [fixed_policy("slower_only", lambda k, c: [slower])])
    assert per_input.loc[0, "regret_vs_default"] == pytest.approx(times[slower] / times[faster])
    assert per_input.loc[0, "benchmarked"] == 0

    scored = pd.read_csv(out / "per_input_packed_linear.csv")
    assert set(scored["policy"]) >= {"default", "space", "cache", "plugin_k10", "plugin_adaptive", "plugin_k1",
                                      "plugin_top1"}
    by_policy = scored.set_index("policy")
    assert by_policy.loc["default", "regret_vs_default"] == pytest.approx(1.0)
    assert by_policy.loc["default", "benchmarked"] == 2
    assert by_policy.loc["cache", "benchmarked"] == 0
    assert by_policy.loc["cache", "picked"] == table.first_pick[key]
    assert (out / "evaluate_packed_linear.png").stat().st_size > 1000
    report = (out / "evaluate.md").read_text()
    assert "| default | 1 |" in report and "Cache hits" in report
    text = results.read_text()
    assert "old" not in text and text.endswith("tail\n") and "### packed_linear" in text


def test_shapes_file_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("op,m,k,n,batch,dtype,layout\nmm,8,16,32,1,bfloat16,NN\nmm,8,x,32,1,bfloat16,NN\n")
    with pytest.raises(ShapesError, match=r"bad.csv:3: k='x'"):
        read_shapes(bad)
    bad.write_text("op,m,k,n,batch,dtype,layout\nconv,8,16,32,1,bfloat16,NN\n")
    with pytest.raises(ShapesError, match=r"bad.csv:2: op 'conv'"):
        read_shapes(bad)
    js = tmp_path / "s.json"
    js.write_text('[{"op": "bmm", "m": 4, "k": 8, "n": 16, "batch": 3, "dtype": "torch.float16", "layout": "tn"}]')
    (row,) = read_shapes(js)
    assert row == {"op": "bmm", "m": 4, "k": 8, "n": 16, "batch": 3, "dtype": "float16", "layout": "TN"}


def test_default_shape_list_is_valid_and_covers_the_kinds():
    rows = read_shapes(os.path.join(REPO, "torchgen_ah", "data", "eval_shapes.csv"))
    assert 30 <= len(rows) <= 40
    assert any(r["m"] <= 17 for r in rows)  # decode token counts
    assert any(r["n"] % 16 or r["k"] % 16 for r in rows)  # odd sizes
    assert {"NT", "TN"} <= {r["layout"] for r in rows}  # backward passes
    assert {r["dtype"] for r in rows} == {"bfloat16", "float16", "float32"}


def test_padding_shape_list_holds_unaligned_gemms_then_aligned_large_k_ones():
    """The padded candidate's benchmark shapes: each unaligned one would get the candidate (padded_sizes), the
    large-K ones are aligned (no candidate) with K at least 32 times M and N (decompose-K's condition)."""
    import torch

    from ah_plugin.inductor.padded_choice import padded_sizes

    rows = read_shapes(os.path.join(REPO, "torchgen_ah", "data", "padding_eval_shapes.csv"))
    padded = [padded_sizes(r["m"], r["k"], r["n"], getattr(torch, r["dtype"])) for r in rows]
    first_aligned = padded.index(None)
    assert first_aligned >= 6 and all(p is not None for p in padded[:first_aligned])
    assert all(p is None and r["k"] >= 32 * max(r["m"], r["n"]) for p, r in zip(padded[first_aligned:], rows[first_aligned:]))
    assert len(rows) - first_aligned == 2


def test_results_section_appended_when_absent(tmp_path):
    path = tmp_path / "R.md"
    path.write_text("# R\n")
    update_results_section(str(path), "evaluate_gpu", "body", day="2026-12-01")
    assert path.read_text() == ("# R\n\n<!-- BEGIN evaluate_gpu -->\n_Written 2026-12-01._\n\nbody\n"
                                "<!-- END evaluate_gpu -->\n")
    # a body with a heading: the date goes under it; rewriting replaces the whole section
    update_results_section(str(path), "evaluate_gpu", "## Head\n\nnew body", day="2026-12-02")
    assert path.read_text() == ("# R\n\n<!-- BEGIN evaluate_gpu -->\n## Head\n\n_Written 2026-12-02._\n\nnew body\n"
                                "<!-- END evaluate_gpu -->\n")


@pytest.mark.slow
def test_two_workers_share_the_shapes_and_a_rerun_times_what_the_budget_skipped(tmp_path):
    """A budget too short for any shape leaves them "skipped"; the same command again (the folder is the
    state) times them, dealt between two worker processes, each with its own log and Inductor cache."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,m,k,n,batch,dtype,layout\n"
                      "packed_linear,16,64,48,1,float32,NN\npacked_linear,8,32,40,1,float32,NN\n")
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=REPO)
    base = [sys.executable, "-m", "torchgen_ah.evaluate", str(shapes), "--out", str(out), "--reps", "1",
            "--device", "cpu", "--workers", "2", "--no-plots"]
    first = subprocess.run(base + ["--max-minutes", "0.005"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=170)
    statuses = [json.loads(line)["status"] for line in open(out / "progress.jsonl")]
    assert statuses and set(statuses) == {"skipped"}, (statuses, first.stderr[-2000:])
    second = subprocess.run(base + ["--max-minutes", "3"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=240)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    final = {}
    for line in open(out / "progress.jsonl"):
        entry = json.loads(line)
        final[entry["index"]] = entry["status"]
    assert final == {0: "ok", 1: "ok"}
    assert (out / "worker0.log").exists() and (out / "worker1.log").exists()
    assert (out / "inductor_cache0").is_dir() and (out / "inductor_cache1").is_dir()
    table = EvaluationTimingTable.load(out / "timing" / "packed_linear")
    assert len(table.inputs()) == 2


@pytest.mark.slow
def test_profile_writes_where_a_modes_compile_time_goes(tmp_path):
    """``--profile``: the file's next shape compiled once more under cProfile in the mode's process."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compile_cost_run import run_compile_cost

    out = run_compile_cost(tmp_path, ["mm,32,64,16,1,float32,NN", "mm,48,64,40,1,float32,NN"], "--shapes", "1",
                           "--modes", "off", "--profile", "--side-by-side-rounds", "0", "--device", "cpu")
    text = (out / "off.profile.txt").read_text()
    assert text.startswith("first call under cProfile: ") and "cumulative" in text
    assert float(text.split(": ")[1].split(" s")[0]) > 0

