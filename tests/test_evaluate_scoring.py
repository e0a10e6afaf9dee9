"""Pure scoring on hand-built timing tables with known answers (no compile, no GPU)."""

import math
import os
import time

import pytest

from ah_plugin.collect.log_format import append_rows, format_row
from torchgen_ah.data.aggregate import geomean
from torchgen_ah.evaluation.policies import (
    builtin_ah_policy,
    cache_policy,
    check_bars,
    default_policy,
    fixed_policy,
    score_policies,
    space_policy,
    summarize,
)
from torchgen_ah.evaluation.timing_table import EvaluationTimingTable, build_timing_table, table_from_records
from mm_log_meta import MM_LOG_METADATA

# Input "a": default's set {x, y}; z is only in the wider space and is the fastest.
# Input "b": default's set {x, y, z}.
RECORDS = [
    ("a", "x", 2.0),
    ("a", "y", 1.0),
    ("a", "z", 0.8),
    ("b", "x", 4.0),
    ("b", "y", 5.0),
    ("b", "z", math.inf),  # failed everywhere
]
DEFAULTS = {"a": {"x", "y"}, "b": {"x", "y", "z"}}


def table():
    return table_from_records(RECORDS, DEFAULTS)


def summary_of(policies):
    per_input = score_policies(table(), policies)
    return per_input, summarize(per_input).set_index("policy")


def test_regrets_against_default_pick_and_space_best():
    slow = fixed_policy("slowest_known", lambda key, c: ["x"])
    per_input, summary = summary_of([default_policy(), space_policy(), slow])
    got = per_input.set_index(["input", "policy"])
    assert got.loc[("a", "default"), "time_ms"] == 1.0
    assert got.loc[("a", "space"), "regret_vs_default"] == pytest.approx(0.8)
    assert got.loc[("a", "slowest_known"), "regret_vs_default"] == pytest.approx(2.0)
    assert got.loc[("a", "slowest_known"), "regret_vs_best"] == pytest.approx(2.5)
    assert got.loc[("b", "slowest_known"), "regret_vs_default"] == pytest.approx(1.0)
    assert summary.loc["slowest_known", "gmean_vs_default"] == pytest.approx(math.sqrt(2.0))
    assert summary.loc["slowest_known", "max_vs_default"] == pytest.approx(2.0)
    assert summary.loc["slowest_known", "worse_10pct"] == 1
    # one choice: taken without benchmarking
    assert summary.loc["slowest_known", "mean_benchmarked"] == 0
    assert summary.loc["default", "mean_benchmarked"] == pytest.approx(2.5)
    assert summary.loc["space", "gmean_vs_best"] == pytest.approx(1.0)


def test_failed_choice_gives_infinite_regret_and_geomean():
    broken = fixed_policy("broken", lambda key, c: ["z"])
    per_input, summary = summary_of([broken])
    assert per_input.set_index("input").loc["b", "regret_vs_default"] == math.inf
    assert summary.loc["broken", "gmean_vs_default"] == math.inf
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)


def test_cache_hit_benchmarks_nothing_and_miss_falls_back():
    per_input, summary = summary_of([cache_policy({"a": "x"})])
    rows = per_input.set_index("input")
    assert rows.loc["a", "benchmarked"] == 0 and rows.loc["a", "time_ms"] == 2.0
    assert rows.loc["b", "benchmarked"] == 3 and rows.loc["b", "note"].startswith("cache miss")


def test_policy_choosing_unknown_choice_is_an_error():
    with pytest.raises(ValueError, match="not in the timing table"):
        score_policies(table(), [fixed_policy("bad", lambda key, c: ["nope"])])


def test_bars_pass_and_fail_with_numbers():
    fast = fixed_policy("plugin_adaptive", lambda key, c: ["y", "x"] if key == "a" else ["x", "y"])
    quality = fixed_policy("plugin_k10", lambda key, c: ["z", "y"] if key == "a" else ["x", "z"])
    per_input = score_policies(table(), [default_policy(), fast, quality, cache_policy({"a": "y", "b": "x"})])
    summary = summarize(per_input)
    secs = {"default": 10.0, "plugin_adaptive": 2.0, "plugin_k10": 9.0}
    bars = {b.name.split()[0]: b for b in check_bars(summary, autotune_seconds=secs,
                                                       compile_seconds={"cache": 1.05, "off": 1.0})}
    assert bars["Fast"].passed is True and "20%" not in bars["Fast"].detail
    assert "autotune 2.00 s vs default 10.00 s" in bars["Fast"].detail
    # quality: geomean speedup sqrt(1/0.8) = 1.118 and worst 1.0 -> passes
    assert bars["Quality"].passed is True and "1.1180" in bars["Quality"].detail
    assert bars["Cache"].passed is True
    slow_cache = check_bars(summary, compile_seconds={"cache": 1.2, "off": 1.0})[2]
    assert slow_cache.passed is False and "1.200x" in slow_cache.detail


def _write_log(path, metadata, rows):
    lines = [format_row(metadata, feats, choice, t) for feats, choice, t in rows]
    append_rows(path, metadata, lines)


META = dict(MM_LOG_METADATA)


def feats(m, k, n):
    return {
        "m": m, "k": k, "n": n, "mat1_stride_0": k, "mat1_stride_1": 1, "mat2_stride_0": n,
        "mat2_stride_1": 1, "mat1_dtype": "torch.bfloat16", "mat2_dtype": "torch.bfloat16",
        "mat1_iscontig": True, "mat2_iscontig": True, "using_tf32": "not_float_32",
    }


def test_table_from_logs_takes_median_default_set_and_first_pick(tmp_path):
    f = feats(64, 128, 256)
    searched = tmp_path / "searched.txt"
    default = tmp_path / "default.txt"
    # three repetitions over the searched space {x, y, w}
    _write_log(searched, META, [(f, "x", 1.0), (f, "y", 3.0), (f, "w", math.inf),
                                (f, "x", 9.0), (f, "y", 2.0), (f, "w", math.inf),
                                (f, "x", 2.0), (f, "y", 2.5), (f, "w", math.inf)])
    # one default-space autotuning {x, y}: y wins this one
    _write_log(default, META, [(f, "x", 5.0), (f, "y", 2.2)])
    t = build_timing_table([searched], [default], labels=None)
    (key,) = t.inputs()
    times = t.times(key)
    assert times["x"] == pytest.approx(3.5)  # median of 1, 9, 2, 5
    assert times["y"] == pytest.approx(2.35)  # median of 3, 2, 2.5, 2.2
    assert times["w"] == math.inf
    assert sorted(t.default_set(key)) == ["x", "y"]
    assert t.first_pick[key] == "y"
    assert t.features[key]["m"] == 64 and t.features[key]["mat1_dtype"] == "torch.bfloat16"
    t.save(tmp_path / "out")
    back = EvaluationTimingTable.load(tmp_path / "out")
    assert back.times(key) == times and back.default_set(key) == t.default_set(key)
    assert back.metadata["device_capa"] == (9, 0)


def test_inputs_the_default_run_never_logged_are_left_out_not_scored_as_misses(tmp_path):
    """pad_mm may pad a shape in the searched-space runs only (17 -> 24 rows): that key has no default
    set or default pick, so it is listed in ``left_out`` and kept out of every policy's score."""
    f, padded = feats(17, 2048, 8192), feats(24, 2048, 8192)
    searched, default = tmp_path / "searched.txt", tmp_path / "default.txt"
    _write_log(searched, META, [(f, "x", 1.0), (f, "y", 2.0), (padded, "x", 1.5), (padded, "z", 0.5)])
    _write_log(default, META, [(f, "x", 1.1), (f, "y", 2.1)])
    t = build_timing_table([searched], [default], labels=None)
    (kept,) = t.inputs()
    assert t.features[kept]["m"] == 17 and len(t.left_out) == 1 and t.left_out[0].startswith("24,")
    per_input = score_policies(t, [default_policy(), cache_policy(t.first_pick)])
    assert set(per_input["input"]) == {kept}
    assert per_input.loc[per_input["policy"] == "cache", "benchmarked"].tolist() == [0]
    t.save(tmp_path / "out")
    assert EvaluationTimingTable.load(tmp_path / "out").left_out == t.left_out
    # without default logs every input is scored (each one's searched choices are its default set)
    assert len(build_timing_table([searched]).inputs()) == 2


def test_builtin_ah_matches_upstream_controller_on_h100_metadata():
    """Our replay of the built-in AutoHeuristic keeps what upstream's controller keeps."""
    from torch._inductor.autoheuristic.artifacts._MMRankingH100 import MMRankingH100
    from torch._inductor.autoheuristic.autoheuristic_utils import AHMetadata
    from torch._inductor.autoheuristic.learned_heuristic_controller import LearnedHeuristicController

    from ah_plugin.inductor.compile_tools import _builtin_context

    known = MMRankingH100().choices
    candidates = known[:5] + known[40:80] + ["extern_mm"]
    f = feats(1024, 4096, 512)
    records = [("i", c, 1.0 + i / 100) for i, c in enumerate(candidates)]
    t = table_from_records(records, metadata=META, features={"i": f})
    sel = builtin_ah_policy(META).select("i", f, candidates, candidates)
    ctx = _builtin_context(f, "mm")
    upstream = LearnedHeuristicController(
        AHMetadata(232448, (9, 0), candidates, "mm"), ctx
    ).get_decisions_ranked(10)
    assert upstream and set(sel.choices) == set(upstream) | {"extern_mm"}
    assert len(sel.choices) <= 11
    # wrong device: no decision, default's set
    other = dict(META, device_capa=(8, 0))
    assert builtin_ah_policy(other).select("i", f, candidates, ["x"]).choices == ["x"]
    assert len(score_policies(t, [builtin_ah_policy(META)])) == 1


def test_compile_cost_autotune_seconds_subtract_max_autotune_off(tmp_path):
    from torchgen_ah.evaluation.compile_cost import mode_environment, summarize_cost

    results = [
        {"mode": "off", "op": "mm", "shape": "a", "seconds": 1.0},
        {"mode": "off", "op": "mm", "shape": "b", "seconds": 2.0},
        {"mode": "default", "op": "mm", "shape": "a", "seconds": 11.0},
        {"mode": "default", "op": "mm", "shape": "b", "seconds": 22.0},
        {"mode": "cache_record", "op": "mm", "shape": "a", "seconds": 99.0},
        {"mode": "cache", "op": "mm", "shape": "a", "seconds": 1.05},
    ]
    cost = summarize_cost(results)["mm"]
    assert cost["autotune_seconds"]["default"] == pytest.approx(15.0)
    assert cost["compile_seconds"]["cache"] == pytest.approx(1.05)
    assert "cache_record" not in cost["compile_seconds"]
    # the older name of the mode (ours_adaptive, in earlier runs' files and commands) is the same mode
    assert mode_environment("ours_adaptive", str(tmp_path), base_env={})[0]["AH_PLUGIN_TOP_K"] == "adaptive"
    env, mode = mode_environment("plugin_adaptive", str(tmp_path), base_env={"AH_TUNABLE_ENABLED": "1"})
    assert env["AH_PLUGIN_TOP_K"] == "adaptive" and "AH_TUNABLE_ENABLED" not in env
    assert mode == "max-autotune-no-cudagraphs"
    env, mode = mode_environment("off", str(tmp_path), base_env={})
    assert mode is None and env["AH_PLUGIN_DISABLE"] == "1"
    # the caller's plugin variables never change what a mode is (fast mode is the shipped fast mode)
    fast = mode_environment("fast", str(tmp_path), base_env={"AH_PLUGIN_L2_RULE": "off", "AH_PLUGIN_CONFIDENCE": "0.5",
                                                              "AH_PLUGIN_VERBOSE": "1"})[0]
    assert "AH_PLUGIN_L2_RULE" not in fast and "AH_PLUGIN_CONFIDENCE" not in fast and fast["AH_PLUGIN_VERBOSE"] == "1"
    assert mode_environment("plugin_k1", str(tmp_path), base_env={})[0]["AH_PLUGIN_TOP_K"] == "1"
    # quality_padded is quality mode with its padded candidate; quality is without it, whatever the caller set
    padded = mode_environment("quality_padded", str(tmp_path), base_env={})[0]
    plain = mode_environment("quality", str(tmp_path), base_env={"AH_PLUGIN_PADDED_CHOICE": "on"})[0]
    assert (padded["AH_PLUGIN_TOP_K"], padded["AH_PLUGIN_PADDED_CHOICE"]) == ("quality", "auto")
    assert (plain["AH_PLUGIN_TOP_K"], plain["AH_PLUGIN_PADDED_CHOICE"]) == ("quality", "off")
    alone = mode_environment("plugin_top1", str(tmp_path), base_env={"AH_PLUGIN_KEEP_ATEN": "1"})[0]
    assert (alone["AH_PLUGIN_TOP_K"], alone["AH_PLUGIN_KEEP_ATEN"], alone["AH_PLUGIN_MIN_CHOICES"]) == ("1", "0", "1")
    # mm covers addmm (linear layers); FlexAttention's ops as a user of it switches them on
    assert alone["TORCHINDUCTOR_AUTOHEURISTIC_USE"] == "mm,convolution,flex_attention,flex_decoding,flex_attention_backward"
    assert env["TRITON_CACHE_DIR"] != mode_environment("default", str(tmp_path), base_env={})[0]["TRITON_CACHE_DIR"]
    # a *_frozen mode is its base mode with Inductor's freezing, in caches of its own
    frozen, frozen_mode = mode_environment("quality_frozen", str(tmp_path), base_env={})
    quality, quality_mode = mode_environment("quality", str(tmp_path), base_env={})
    assert frozen_mode == quality_mode and frozen.pop("TORCHINDUCTOR_FREEZING") == "1"
    assert frozen["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "caches_quality_frozen" / "inductor")
    assert {k: v for k, v in frozen.items() if "CACHE_DIR" not in k} == \
        {k: v for k, v in quality.items() if "CACHE_DIR" not in k}
    assert mode_environment("off_frozen", str(tmp_path), base_env={})[1] is None


def test_plugin_top1_keeps_one_choice_and_benchmarks_nothing_on_the_committed_h200_run():
    """``plugin_top1`` replayed on seven inputs of the committed H200 timing run (tests/data/evaluate_h200): one
    choice per input, nothing benchmarked, and its regret is that choice's time over default's pick."""
    from torchgen_ah.evaluation.evaluate import DEFAULT_SHAPES, build_tables, read_shapes
    from torchgen_ah.evaluation.policies import ours_policy, score_policies

    run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "evaluate_h200")
    table = build_tables(read_shapes(DEFAULT_SHAPES), run)["mm"]
    scored = score_policies(table, [ours_policy(1, table.metadata, alone=True),
                                    ours_policy(1, table.metadata)])
    alone = scored[scored["policy"] == "plugin_top1"]
    with_aten = scored[scored["policy"] == "plugin_k1"]
    assert len(alone) == 7 and (alone["benchmarked"] == 0).all()  # the shapes whose logs the fixture holds
    assert (with_aten["benchmarked"] == 2).all()
    assert (alone["regret_vs_default"].to_numpy() >= with_aten["regret_vs_default"].to_numpy() - 1e-9).all()
    assert (alone["time_ms"] / alone["default_ms"]).round(9).tolist() == alone["regret_vs_default"].round(9).tolist()


def test_score_run_gives_the_rankers_the_runs_gpu_name_and_lists_left_out_inputs(tmp_path):
    """Logs do not carry the device name, but device-specific artifacts (an H200 one) need it to be
    chosen: the run's environment.json supplies it. A padded key only the searched runs logged is
    reported by the report's ``main`` and not scored."""
    import json

    from torchgen_ah.evaluation.eval_worker import log_paths
    from torchgen_ah.evaluation.evaluate import main

    shapes = tmp_path / "shapes.csv"
    shapes.write_text("op,m,k,n,batch,dtype,layout\nmm,17,2048,8192,1,bfloat16,NN\n")
    out = tmp_path / "run"
    default_log, searched_log = log_paths(str(out), 0, "mm")
    os.makedirs(os.path.dirname(default_log))
    f, padded = feats(17, 2048, 8192), feats(24, 2048, 8192)
    _write_log(default_log, META, [(f, "extern_mm", 1.0), (f, "x", 0.9)])
    _write_log(searched_log, META, [(f, "extern_mm", 1.0), (f, "x", 0.8), (padded, "x", 0.7)])
    (out / "environment.json").write_text(json.dumps({"gpu": "NVIDIA H200", "torch": "t", "triton": "t"}))
    (out / "progress.jsonl").write_text(json.dumps({"index": 0, "status": "ok", "seconds": 1.0}) + "\n")
    first, second = tmp_path / "e2e_1.md", tmp_path / "e2e_2.md"  # two end-to-end runs, each kept whole
    first.write_text("first e2e run table\n")
    second.write_text("second e2e run table\n")
    assert main([str(shapes), "--out", str(out), "--from-run", "--no-plots", "--results", str(tmp_path / "R.md"),
                 "--e2e", str(first), "--e2e", str(second), "--e2e", str(tmp_path / "absent.md")]) == 0
    table = EvaluationTimingTable.load(out / "timing" / "mm")
    assert table.metadata["device_name"] == "NVIDIA H200"
    report = (tmp_path / "R.md").read_text()
    assert "### mm: 1 inputs" in report
    assert "left out of the scores (1)" in report and "mm 17x2048x8192 bfloat16 NN, logged as 24," in report
    assert report.index("first e2e run table") < report.index("second e2e run table")


@pytest.mark.slow
def test_e2e_models_runs_each_mode_in_its_own_process_with_the_plugin_as_asked(tmp_path):
    """``e2e_models`` on the CPU with the torch-only ``mlp``: one fresh process per mode, each recording
    whether the plugin was on and what it used; the table has both rows and fast mode's verdict, and
    Inductor's AUTOTUNE lines are counted from a mode's log."""
    import json

    from torchgen_ah.evaluation import e2e_models
    from torchgen_ah.evaluation.compile_cost import OURS_USE

    out = tmp_path / "e2e"
    rc = e2e_models.main(["--out", str(out), "--models", "mlp", "--modes", "off,fast", "--device", "cpu",
                          "--reps", "2", "--once", "off", "--max-minutes", "4"])
    assert rc == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # --once off: off in the first repetition only, fast in both
    assert sorted((r["mode"], r["rep"]) for r in records) == [("fast", 0), ("fast", 1), ("off", 0)]
    rows = {r["mode"]: r for r in records if r["rep"] == 0}
    assert set(rows) == {"off", "fast"}
    assert rows["fast"]["plugin"] == {"installed": True, "use": sorted(OURS_USE.split(",")),
                                     "top_k": "fast"}
    assert rows["off"]["plugin"]["use"] == []
    assert all(r["compile_seconds"] > 0 and r["step_ms"] > 0 and r["rep"] == 0 for r in rows.values())
    assert all(r["steps_per_window"] >= e2e_models.MIN_STEPS_PER_WINDOW for r in rows.values())
    table = (out / "e2e.md").read_text()
    assert "after 1 s of warm-up steps" in table
    assert "| mlp | off | 1 |" in table and "| mlp | fast | 2 |" in table
    # fast mode's verdict row: compile against off's; no default run, so the step is compared with off's:
    # a CPU's timings decide between "not judged" and a miss already against off alone
    [verdict] = [ln for ln in table.split("Fast mode against the bars")[1].splitlines() if ln.startswith("| mlp |")]
    assert verdict.endswith(("| not judged (default not measured: step vs off only) |", "| missed |",
                             "| missed (step against off alone) |")), verdict
    log = out / "mlp" / "fake.log"
    log.write_text("SingleProcess AUTOTUNE benchmarking takes 0.2 seconds and 0.1 seconds precompiling for 7 "
                   "choices\nx\nAUTOTUNE benchmarking takes 1.5 seconds and 0.0 seconds precompiling for 3 choices\n")
    assert e2e_models.autotune_counts(str(log)) == (2, 10)
    assert e2e_models.autotune_counts(str(out / "mlp" / "missing.log")) is None
    assert e2e_models.main(["--out", str(out), "--models", "bert"]) == 2
    assert e2e_models.main(["--out", str(out), "--models", "mlp", "--modes", "off", "--once", "default"]) == 2


def test_step_windows_hold_enough_calls_and_warm_up_runs_for_its_time():
    from torchgen_ah.evaluation import e2e_models

    assert e2e_models.steps_per_window(0.0005) == 40  # a decode step: 20 ms of them
    assert e2e_models.steps_per_window(0.006) == e2e_models.MIN_STEPS_PER_WINDOW  # a training step
    assert e2e_models.steps_per_window(0.0) == e2e_models.MIN_STEPS_PER_WINDOW
    calls, syncs = [], []

    def step():  # a quick step with an occasional host stall, as a CPU under load has
        calls.append(1)
        time.sleep(0.02 if len(calls) % 4 == 0 else 0.0005)

    per_step = e2e_models.warm_up(step, lambda: syncs.append(1), seconds=0.2)
    assert len(calls) >= 5 and len(syncs) == len(calls) + 1
    assert 0.0005 <= per_step < 0.005  # the typical step, not the mean the stalls inflate (about 5.4 ms)


def test_e2e_models_combine_reports_runs_as_one_table_with_medians(tmp_path):
    """Runs split over several calls: one table, a cell's step time the median of its processes."""
    import json

    from torchgen_ah.evaluation import e2e_models

    def row(mode, compile_s, step_ms):
        return json.dumps({"mode": mode, "model": "mlp", "rep": 0, "compile_seconds": compile_s,
                           "step_ms": step_ms, "benchmarked": 0})

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(row("off", 10.0, 1.0) + "\n" + row("fast", 11.0, 1.2) + "\n")
    second.write_text(row("off", 12.0, 2.0) + "\n" + row("default", 40.0, 1.5) + "\n" + row("quality", 30.0, 1.4) + "\n")
    results_md = tmp_path / "RESULTS.md"
    rc = e2e_models.main(["--combine", f"{first},{second}", "--out", str(tmp_path / "out"),
                          "--results", str(results_md)])
    assert rc == 0
    table = (tmp_path / "out" / "e2e.md").read_text()
    assert "| mlp | off | 2 | 11.0 | 1.500 | 0 |" in table  # two processes: medians
    assert "| mlp | fast | 1 | 11.0 | 1.200 | 0 |" in table
    # fast against off (compile 11/11) and min(off, default) (step 1.2/1.5)
    assert "| mlp | 1.00 | 0.28 | 0.800 | met |" in table  # compile / off, / default, step / min(off, default)
    # quality: compile within default's (30/40), steps 1.4/1.5 over the one model: the 0.97x bar is met
    assert "| mlp | 2.73 | 0.75 | 0.933 | met |" in table
    assert "step 0.933x min(off, default). Step bar (<= 0.97x): met." in table
    assert "<!-- BEGIN e2e_models -->" in results_md.read_text()
    assert "10 windows of 10 back-to-back calls after 5 warm-up calls" in table  # rows of the older method
    assert e2e_models.main(["--combine", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2


def test_a_model_without_default_is_missed_when_off_alone_already_misses():
    """Without default max-autotune the step ratio is to off alone, a lower bound of the one to
    min(off, default): 1.05x off is a miss whatever default would have done; 1.00x is not judged."""
    from torchgen_ah.evaluation import e2e_models

    table = {("slow", "off"): {"compile_seconds": 10.0, "step_ms": 1.0, "benchmarked": 0, "reps": 3},
             ("slow", "fast"): {"compile_seconds": 11.0, "step_ms": 1.05, "benchmarked": 0, "reps": 3},
             ("even", "off"): {"compile_seconds": 10.0, "step_ms": 1.0, "benchmarked": 0, "reps": 3},
             ("even", "fast"): {"compile_seconds": 11.0, "step_ms": 1.0, "benchmarked": 0, "reps": 3}}
    slow, even = e2e_models.mode_verdicts(table)
    assert (slow["met"], slow["missed"], even["met"], even["missed"]) == (False, True, False, False)
    text = "\n".join(e2e_models._verdict_lines("fast", [slow, even]))
    assert "| slow | 1.10 | - | 1.050 | missed (step against off alone) |" in text
    assert "| even | 1.10 | - | 1.000 | not judged (default not measured: step vs off only) |" in text
    # a compile miss is against off whatever default does: no qualifier
    table[("even", "fast")]["compile_seconds"] = 15.0
    [_, heavy] = e2e_models.mode_verdicts(table)
    assert "| even | 1.50 | - | 1.000 | missed |" in "\n".join(e2e_models._verdict_lines("fast", [heavy]))


def test_quality_mode_is_judged_on_compile_against_default_and_never_without_it():
    from torchgen_ah.evaluation import e2e_models

    def cell(compile_s, step):
        return {"compile_seconds": compile_s, "step_ms": step, "benchmarked": 0, "reps": 1}

    table = {("m", "off"): cell(10.0, 1.0), ("m", "default"): cell(40.0, 1.1), ("m", "quality"): cell(30.0, 0.95),
             ("n", "off"): cell(10.0, 1.0), ("n", "default"): cell(20.0, 1.0), ("n", "quality"): cell(30.0, 0.9),
             ("o", "off"): cell(10.0, 1.0), ("o", "quality"): cell(5.0, 0.9)}
    cheap, costly, alone = e2e_models.mode_verdicts(table, "quality")
    assert (cheap["met"], costly["met"], costly["missed"]) == (True, False, True)
    assert (alone["met"], alone["missed"]) == (False, False)  # no default: its compile bar cannot be judged


def test_a_mode_stopped_at_its_time_limit_is_reported_with_the_option_that_set_it():
    """A mode's process killed at its limit is not a bare exit code: the report names --run-timeout when the
    per-process limit stopped it and --max-minutes when the run's budget did; other failures keep their code."""
    import time

    from torchgen_ah.evaluation.compile_cost import TIMED_OUT, run_steps

    deadline = time.time() + 600
    codes = {"a": TIMED_OUT, "b": 0, "c": 3}
    status = run_steps(["a", "b", "c"], deadline, lambda step, left: codes[step], label="m/", process_limit=60)
    assert status["m/a"] == "stopped at the per-process limit, 60 s (--run-timeout; see m/a.log)"
    assert status["m/b"] == "ok" and status["m/c"] == "exit 3 (see m/c.log)"
    budget = run_steps(["a"], time.time() + 90, lambda step, left: TIMED_OUT, process_limit=300)["a"]
    assert budget.startswith("stopped at ") and "the time left of the run's budget (--max-minutes; see a.log)" in budget
    assert "--max-minutes" in run_steps(["a"], deadline, lambda step, left: TIMED_OUT)["a"]  # compile_cost: no per-process limit
    assert run_steps(["a"], time.time() + 2, lambda step, left: 0)["a"] == "skipped (time budget)"
