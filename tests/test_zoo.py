"""The model zoo (``torchgen_ah.evaluation.zoo``): run order, the report's ratios and verdicts on plain rows,
``--combine`` and ``--skip-done``, and one real run on the CPU: a tiny decoder served at four batch sizes
in fresh processes, every compile counted."""

from __future__ import annotations

import importlib.util
import json
import shlex

import pytest
from cpu_fp8 import rowwise_on_cpu

from torchgen_ah.evaluation import zoo, zoo_models, zoo_report
from torchgen_ah.evaluation.compile_cost import OURS_USE


def _row(model, mode, compile_s, step_ms, code="c0", templates=0, rep=0, **extra):
    return {"model": model, "mode": mode, "rep": rep, "kind": extra.pop("kind", "infer"), "compile_seconds": compile_s,
            "compile_calls": extra.pop("compile_calls", [compile_s]), "step_ms": step_ms, "code": code,
            "code_summary": {"graphs": 1, "kernels": 3, "templates": templates, "extern_calls": {}},
            "result_error": extra.pop("result_error", 1e-3), **extra}


def test_plan_keeps_a_models_modes_together_and_rotates_their_order():
    steps = zoo.plan(["a", "b", "c"], ["off", "fast", "off_again"], reps=2, once={"off_again"})
    assert steps[:9] == [(0, "a", "off"), (0, "a", "fast"), (0, "a", "off_again"),
                         (0, "b", "fast"), (0, "b", "off_again"), (0, "b", "off"),
                         (0, "c", "off_again"), (0, "c", "off"), (0, "c", "fast")]
    # the second repetition leaves the once-mode out and keeps rotating
    assert steps[9:] == [(1, "a", "fast"), (1, "a", "off"), (1, "b", "off"), (1, "b", "fast"),
                         (1, "c", "fast"), (1, "c", "off")]


def test_skip_done_leaves_out_measured_processes_and_models_that_could_not_be_built(tmp_path):
    earlier = tmp_path / "a.jsonl"
    earlier.write_text("\n".join(json.dumps(r) for r in [
        _row("m1", "off", 5.0, 1.0), {"model": "m2", "mode": "off", "rep": 0, "skipped": "ImportError: timm"},
        {"model": "m1", "mode": "fast", "rep": 0, "failed": "RuntimeError: x"}]) + "\n")
    done = zoo.done_in([str(earlier), str(tmp_path / "missing.jsonl")])
    steps = zoo.plan(["m1", "m2", "m3"], ["off", "fast"], reps=1)
    # m1's off was measured; its failed fast runs again; m2 could not be built; m3 is new
    assert zoo.remaining(steps, done) == [(0, "m1", "fast"), (0, "m3", "off"), (0, "m3", "fast")]


def test_report_ratios_spread_same_code_and_verdicts_on_plain_rows():
    rows = [
        # identical code everywhere: fast's step 1.5% over off's median is noise by construction
        _row("same", "off", 10.0, 1.00), _row("same", "off_again", 12.0, 1.02), _row("same", "fast", 11.0, 1.025),
        # other code, step within the off processes' spread but over the bar; compile over the bar
        _row("slow", "off", 10.0, 2.00), _row("slow", "off_again", 10.0, 2.10),
        _row("slow", "fast", 14.0, 2.10, code="c1", templates=3),
        _row("slow", "quality", 25.0, 1.90, code="c2", templates=5),
        # other code, inside both bars
        _row("good", "off", 20.0, 3.0), _row("good", "fast", 22.0, 2.97, code="c1", templates=1),
        # off's own processes generated two codes: fast cannot be said to match
        _row("varies", "off", 5.0, 1.0, code="x"), _row("varies", "off_again", 5.0, 1.0, code="y"),
        _row("varies", "fast", 5.0, 1.0, code="x"),
    ]
    summary = zoo_report.summarize(rows)
    same, slow, good = summary["same"], summary["slow"], summary["good"]
    assert same["off"]["compile_seconds"] == 11.0 and same["off"]["step_ms"] == pytest.approx(1.01)
    assert same["spread"] == pytest.approx(0.02)
    assert same["modes"]["fast"]["same_code"] == "yes"
    assert slow["modes"]["fast"]["compile_ratio"] == pytest.approx(1.4)
    assert slow["modes"]["fast"]["step_ratio"] == pytest.approx(2.10 / 2.05)
    assert slow["modes"]["fast"]["same_code"] == "no" and slow["modes"]["fast"]["templates"] == 3
    assert good["spread"] is None and summary["varies"]["modes"]["fast"]["same_code"] == "off varies"
    text = zoo_report.markdown(rows, "python -m torchgen_ah.evaluation.zoo --models same,slow,good,varies")
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert lines["same"].endswith("| met (off's code) |")
    assert lines["slow"].endswith("| missed: compile 1.40x, step 1.024x (within the identical-code spread) |")
    assert "| 2.50 / 0.927 |" in lines["slow"]  # quality's compile x / step x
    assert lines["good"].endswith("| met |") and "| 1/1 |" in lines["good"]
    assert "Fast mode met both bars on 3 of 4 models; it generated off's code on 1." in text
    assert text.startswith("Command: `python -m torchgen_ah.evaluation.zoo --models same,slow,good,varies`")


def test_report_names_compile_and_step_misses_the_spread_does_not_explain():
    assert zoo_report.verdict(1.2, 1.05, "no", 0.02) == "missed: step 1.050x"
    assert zoo_report.verdict(1.31, 1.0, "yes", None) == "missed: compile 1.31x"
    assert zoo_report.verdict(1.3, 1.01, "no", None) == "met"


def test_report_serving_table_errors_and_failures():
    by_batch = {"off": {"8": 1.0, "1": 0.5}, "off_again": {"8": 1.02, "1": 0.5}, "fast": {"8": 1.03, "1": 0.49}}
    rows = [_row("serve", mode, c, (b["8"] * b["1"]) ** 0.5, kind="serving", compile_calls=[c / 2, c / 4, c / 4],
                 step_ms_by_batch=b) for mode, b, c in (("off", by_batch["off"], 20.0),
                                                       ("off_again", by_batch["off_again"], 20.0),
                                                       ("fast", by_batch["fast"], 24.0))]
    rows[2]["result_error"] = 0.5
    rows += [{"model": "bert", "mode": "off", "rep": 0, "skipped": "ModuleNotFoundError: No module named 'transformers'"},
             {"model": "t5", "mode": "fast", "rep": 0, "failed": "RuntimeError: boom"}]
    text = zoo_report.markdown(rows, "cmd", status={"t5/rep0/fast": "exit 1 (see t5/rep0/fast.log)",
                                                    "vit/rep0/off": "ok"})
    assert "| serve | serving (3 compiles) | 20.0 |" in text
    assert "serve, step per batch size in the order called (off's ms, the other modes as x off's): 8: 1.010 ms, " \
        "fast 1.020; 1: 0.500 ms, fast 0.980." in text  # off's median, fast x off's
    assert "serve fast 0.5 (off's code: 0.001)" in text
    assert "Not built (skipped): bert (ModuleNotFoundError: No module named 'transformers')." in text
    assert "Failed: t5 fast (RuntimeError: boom)." in text
    assert "t5/rep0/fast: exit 1" in text and "vit/rep0/off" not in text


def test_combine_writes_one_table_over_several_runs_and_the_results_section(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps(_row("m", "off", 10.0, 1.0)) + "\n" + json.dumps(_row("m", "fast", 12.0, 1.0)) + "\n")
    second.write_text(json.dumps(_row("m", "off_again", 14.0, 1.1)) + "\n")
    results_md = tmp_path / "RESULTS.md"
    assert zoo.main(["--combine", f"{first},{second}", "--out", str(tmp_path / "out"), "--results", str(results_md),
                     "--note", "Two device calls."]) == 0
    text = (tmp_path / "out" / "zoo.md").read_text()
    assert f"Command: `python -m torchgen_ah.evaluation.zoo --combine {first},{second}`" in text
    assert "Two device calls." in text
    assert "| m | infer | 12.0 | 1.050 | 10.0% | 2/1 | 1.00 | 0.952 | yes | 0 | met |" in text
    section = results_md.read_text()
    assert "<!-- BEGIN zoo -->" in section and zoo.HEADING in section
    assert zoo.main(["--combine", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2


def test_a_section_of_its_own_leaves_the_main_zoo_table_alone(tmp_path, capsys):
    rows = tmp_path / "h100.jsonl"
    rows.write_text(json.dumps(_row("m", "off", 10.0, 1.0)) + "\n" + json.dumps(_row("m", "fast", 11.0, 0.99)) + "\n")
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("<!-- BEGIN zoo -->\nthe H200 table\n<!-- END zoo -->\n")
    assert zoo.main(["--combine", str(rows), "--out", str(tmp_path / "out"), "--results", str(results_md),
                     "--section", "zoo_h100", "--heading", "### On an H100"]) == 0
    text = results_md.read_text()
    assert "<!-- BEGIN zoo -->\nthe H200 table\n<!-- END zoo -->" in text
    own = text.split("<!-- BEGIN zoo_h100 -->\n")[1].split("<!-- END zoo_h100 -->")[0]
    assert own.startswith("### On an H100\n") and "| m | infer | 10.0 |" in own
    assert f"--combine {rows} --section zoo_h100 --heading '### On an H100'" in own  # the command reruns it
    heading = "### The zoo's H100 run"  # a quote in the heading still gives a command a shell reruns as is
    assert zoo.main(["--combine", str(rows), "--out", str(tmp_path / "out"), "--results", str(results_md),
                     "--section", "zoo_h100", "--heading", heading]) == 0
    command = results_md.read_text().split("Command: `")[-1].split("`")[0]
    assert shlex.split(command)[-2:] == ["--heading", heading]
    capsys.readouterr()
    assert zoo.main(["--combine", str(rows), "--out", str(tmp_path / "o"), "--section", "zoo h100"]) == 2
    assert zoo.main(["--combine", str(rows), "--out", str(tmp_path / "o"), "--heading", "On an H100"]) == 2
    assert "a markdown heading starts with '#'" in capsys.readouterr().err


def test_command_line_refuses_unknown_names_and_lists_the_zoo(capsys):
    assert zoo.main(["--models", "no_such_model", "--out", "unused"]) == 2
    assert zoo.main(["--models", "tiny_mlp", "--modes", "off,warp", "--out", "unused"]) == 2
    assert zoo.main(["--models", "tiny_mlp", "--modes", "off", "--once", "fast", "--out", "unused"]) == 2
    assert "unknown or no model or mode (no_such_model)" in capsys.readouterr().err
    assert zoo.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in zoo_models.ENTRIES)


def test_the_zoo_holds_the_models_the_evaluation_needs():
    entries = [zoo_models.ENTRIES[name] for name in zoo_models.ZOO]
    families = [e.family for e in entries if e.kind == zoo_models.INFER]
    assert families.count("cnn") == 3 and families.count("vit") == 2
    assert {"encoder", "moe", "encoder_decoder"} <= set(families)
    assert {e.family for e in entries if e.kind == zoo_models.TRAIN} == {"cnn", "vit", "decoder"}
    phases = [(e.name.split("_")[0], e.phase) for e in entries if e.family == "decoder" and e.kind == zoo_models.INFER]
    assert {("llama", "prefill"), ("llama", "decode"), ("qwen2", "prefill"), ("qwen2", "decode")} <= set(phases)
    [serving] = [e for e in entries if e.kind == zoo_models.SERVING]
    # the batch-1 call comes after two other sizes: a static graph, the dynamic one, the batch-1 specialization
    assert serving.batches.index(1) >= 2 and len(set(serving.batches)) == len(serving.batches) >= 4
    assert any(e.channels_last and e.name.startswith("resnet50") for e in entries)


def test_tiny_entries_build_with_torch_alone():
    torch = pytest.importorskip("torch")
    for name in ("tiny_mlp", "tiny_decoder", "tiny_serving"):
        built = zoo_models.build(torch, name, "cpu")
        inputs = built.make_inputs(3)
        with torch.no_grad():
            out = built.model(*inputs)
        assert isinstance(out, torch.Tensor) and out.shape[0] == 3 and out.dtype == torch.float32


@pytest.mark.slow
def test_zoo_on_the_cpu_counts_every_compile_judges_steps_in_one_process_and_skips_a_model_it_cannot_build(
        tmp_path, monkeypatch):
    """Real processes, real Inductor compiles (``--steps both``): the tiny model called at batch 4, 1, 2, 8
    compiles three times in each mode's own process (a static graph, the batch-1 specialization, the dynamic
    graph) and not again while timed; compile = the sum of those calls. The one process judging the steps
    compiles each mode once more, the same three graphs and the same code as its own process, and times
    them in interleaved windows at every batch size; the report takes its steps from there. The tiny fp8
    decoder with a static KV cache compiles and decodes too. A timm model, where timm is missing, is a named
    skipped row and gets no second process."""
    import torch

    from torchgen_ah.evaluation.result_check import WRONG_ABOVE
    from torchgen_ah.evaluation.zoo_one_process import ONE_PROCESS

    # on a 2-core machine Inductor's pool of compile processes costs more than it saves, and its idle
    # workers slow the steps timed beside them (a tiny dynamic graph: 36 ms a call instead of 0.05)
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")

    timm_missing = importlib.util.find_spec("timm") is None
    models = ("resnet50_cl," if timm_missing else "") + "tiny_serving,tiny_fp8_decode"
    out = tmp_path / "zoo"
    assert zoo.main(["--out", str(out), "--models", models, "--modes", "off,fast,off_again", "--device", "cpu",
                     "--steps", "both", "--windows", "3", "--warm-up", "0.05", "--max-minutes", "12",
                     "--min-start", "5"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    serving = {r["mode"]: r for r in rows if r["model"] == "tiny_serving"}
    assert set(serving) == {"off", "fast", "off_again", ONE_PROCESS}
    judged = serving.pop(ONE_PROCESS)
    for mode, r in serving.items():
        assert r["kind"] == "serving" and len(r["compile_calls"]) == 3 and r["dynamo_graphs"] == 3
        assert r["inductor_graphs"] == 3 and r["compiled_while_timed"] == 0
        assert r["compile_seconds"] == pytest.approx(sum(r["compile_calls"]), abs=0.01) and r["compile_seconds"] > 0
        assert list(r["step_ms_by_batch"]) == ["4", "1", "2", "8"] and r["step_ms"] > 0
        assert r["result_error"] <= WRONG_ABOVE and r["unchecked"] == 0
        assert r["code"] and r["code_summary"]["templates"] == 0
        mine = judged["steps"][mode]
        # compiled afresh in the shared process: the graphs and the code of the mode's own process
        assert len(mine["compile_calls"]) == 3 and mine["code"] == r["code"], mode
        assert mine["result_error"] <= WRONG_ABOVE and mine["plugin"]["use"] == r["plugin"]["use"]
        assert [len(judged["windows_ms"][b][mode]) for b in ("4", "1", "2", "8")] == [3] * 4
        # a diff from off's code only where the fingerprints differ
        assert ("code_diff_from_off" in mine) == (mode != "off" and mine["code"] != judged["steps"]["off"]["code"])
    assert judged["modes"] == ["off", "fast", "off_again"] and judged["steps"]["fast"]["step_ms"] > 0
    # each mode compiled its kernels in caches of its own, Inductor's in-process caches emptied before each
    assert judged["kernel_caches"] == "per_mode"
    assert all(judged["steps"][mode]["triton_binaries"] == 0 for mode in judged["modes"])  # none on the CPU
    assert serving["fast"]["plugin"]["use"] == sorted(OURS_USE.split(","))
    assert serving["off"]["plugin"]["use"] == []
    assert serving["fast"]["use_stats"] is not None and serving["off"]["use_stats"] is None
    text = (out / "zoo.md").read_text()
    fp8 = {r["mode"]: r for r in rows if r["model"] == "tiny_fp8_decode"}
    if rowwise_on_cpu(torch):
        assert set(fp8) == {"off", "fast", "off_again", ONE_PROCESS} and all("failed" not in r for r in fp8.values())
        assert all(r["result_error"] <= WRONG_ABOVE for mode, r in fp8.items() if mode != ONE_PROCESS)
        assert "| tiny_fp8_decode | 2 |" in text.split("tokens/s = batch / step time.")[1]
    else:  # torch 2.11: the model cannot be built here; the zoo names it and goes on
        [skipped] = fp8.values()
        assert "skipped" in skipped and "tiny_fp8_decode (RuntimeError" in text
    line = text.split("| tiny_serving |")[1].splitlines()[0]
    assert line.startswith(" serving (3 compiles) |") and "| A/A " in line
    assert "tiny_serving, step per batch size in the order called" in text and ", fast " in text and ", off_again " in text
    same = "yes" if serving["fast"]["code"] == serving["off"]["code"] else "no"
    assert f"| {same} | 0 |" in line
    if timm_missing:
        [skipped] = [r for r in rows if r["model"] == "resnet50_cl"]
        assert "timm" in skipped["skipped"] and skipped["mode"] == "off"
        assert "Not built (skipped): resnet50_cl (" in text


_PYTHON_STUB = """#!/usr/bin/env bash
# python3 on the device machine, stood in: the install and the environment probe do nothing, the evaluation
# commands record their arguments where run_batch.sh packs them, -c runs for real
case "$1 $2" in
  "-m pip") exit 0 ;;
  "-m torchgen_ah.evaluation."*) echo "$@" > "$OUT/args.txt"; exit 0 ;;
esac
if [ "$1" = "-" ]; then cat > /dev/null; echo "stand-in environment"; exit 0; fi
exec REAL "$@"
"""


def _job_arguments(tmp_path, part: str, **env_vars) -> list[str]:
    """The zoo or profile command line ``gpu_jobs/zoo.sh`` runs for ``PART=part`` (through run_batch.sh)."""
    import os
    import subprocess
    import sys
    import tarfile

    stub_dir = tmp_path / "bin"
    stub_dir.mkdir(exist_ok=True)
    (stub_dir / "python3").write_text(_PYTHON_STUB.replace("REAL", sys.executable))
    (stub_dir / "python3").chmod(0o755)
    out = tmp_path / part
    out.mkdir()
    env = dict(os.environ, PATH=f"{stub_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), PART=part,
               AH_BATCH_DIR=str(tmp_path / f"batch_{part}"), **env_vars)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(["bash", "gpu_jobs/zoo.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with tarfile.open(out / f"zoo_{part}.tgz") as tar:
        [member] = [m for m in tar.getmembers() if m.name.endswith("args.txt")]
        return tar.extractfile(member).read().decode().split()


def test_the_gpu_job_splits_the_zoo_into_parts_within_the_budget_and_runs_the_rest_and_the_profile(tmp_path):
    def option(args, name):
        return args[args.index(name) + 1]

    parts = {part: _job_arguments(tmp_path, part) for part in ("a", "b", "kv_sdpa", "kv_flex", "c")}
    a = parts["a"]
    assert a[:2] == ["-m", "torchgen_ah.evaluation.zoo"] and option(a, "--modes") == "off,fast,off_again"
    assert option(a, "--steps") == "one_process" and option(parts["c"], "--modes") == "off,fast,quality,off_again"
    assert option(a, "--compile") == "fresh" and "--reps" not in a  # the zoo's default: 1 with fresh compiles
    models = [option(args, "--models").split(",") for args in parts.values()]
    assert sorted(m for part in models for m in part) == sorted(zoo_models.ZOO)  # the parts split the zoo
    assert float(option(a, "--max-minutes")) * 60 <= 555 - 45  # the report is written before the step's limit
    rest = _job_arguments(tmp_path, "rest", DONE="x/a.jsonl,x/b.jsonl", COMPILE="one_process", REPS="2")
    assert option(rest, "--skip-done") == "x/a.jsonl,x/b.jsonl"
    assert option(rest, "--compile") == "one_process" and option(rest, "--reps") == "2"
    assert set(option(rest, "--models").split(",")) == set(zoo_models.ZOO)
    quality = _job_arguments(tmp_path, "quality")
    assert option(quality, "--modes") == "off,quality,off_again" and option(quality, "--report") == "quality"
    assert {zoo_quality_bar(m) for m in option(quality, "--models").split(",")} == {"decode", "prefill", "encoder"}
    profile = _job_arguments(tmp_path, "profile")
    assert profile[:2] == ["-m", "torchgen_ah.evaluation.studies.step_profile"]


def test_the_gpu_jobs_compile_part_profiles_each_model_in_both_orders(tmp_path):
    """PART=compile: per model, the compile profile study twice, fast right after off and after the control,
    with phase times only (no mode under cProfile)."""
    import os
    import subprocess
    import sys
    import tarfile

    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    (stub_dir / "python3").write_text(_PYTHON_STUB.replace("REAL", sys.executable))
    (stub_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PATH=f"{stub_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(out), PART="compile",
               MODELS="llama_train,fp8_decode", AH_BATCH_DIR=str(tmp_path / "batch"))
    proc = subprocess.run(["bash", "gpu_jobs/zoo.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with tarfile.open(out / "zoo_compile.tgz") as tar:
        runs = sorted(tar.extractfile(m).read().decode().strip() for m in tar.getmembers()
                      if m.name.endswith("args.txt"))
    assert len(runs) == 4
    for model in ("llama_train", "fp8_decode"):
        for order in ("off,fast,off_again", "off,off_again,fast"):
            [run] = [r for r in runs if f"--model {model} --modes {order} " in r]
            assert run.startswith("-m torchgen_ah.evaluation.studies.compile_profile") and "--profile  --out" in run
    # CP_PROFILE puts the modes it names under cProfile, for the functions behind a phase
    profiled = dict(env, MODELS="llama_train", CP_PROFILE="off_again,fast")
    proc = subprocess.run(["bash", "gpu_jobs/zoo.sh"], cwd=root, env=profiled, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with tarfile.open(out / "zoo_compile.tgz") as tar:
        runs = [tar.extractfile(m).read().decode() for m in tar.getmembers() if m.name.endswith("args.txt")]
    assert len(runs) == 2 and all("--profile off_again,fast --out" in r for r in runs)
    del env["MODELS"]
    proc = subprocess.run(["bash", "gpu_jobs/zoo.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "PART=compile needs MODELS" in proc.stderr
    env["MODELS"] = "llama_train,fp8_decode,gpt2"  # six orders of up to 120 s: more than a device call holds
    proc = subprocess.run(["bash", "gpu_jobs/zoo.sh"], cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "exceed a device call" in proc.stderr


def zoo_quality_bar(model: str) -> str:
    from torchgen_ah.evaluation import zoo_quality_report

    return zoo_quality_report.step_bar(model)[1]


def test_the_budget_runs_a_models_modes_whole_or_not_at_all():
    now = [0.0]
    steps = zoo.plan(["a", "b"], ["off", "fast", "off_again"], reps=1)
    budget = zoo.Budget(steps, seconds=200, min_start=30, clock=lambda: now[0])
    ran, refused = [], []
    for rep, model, mode in steps:
        why = budget.refuse(rep, model)
        if why is None:
            ran.append((model, mode))
            now[0] += 40  # every process takes 40 s
            budget.took(model, 40)
        else:
            refused.append(why)
    # a: 90 s needed for three processes at 30 s, then 96 s (two at 1.2 x 40), then 48; b's first needs 90 s
    # with 80 left: refused, and so are b's other two though the last alone would fit
    assert ran == [("a", "off"), ("a", "fast"), ("a", "off_again")]
    assert refused == ["skipped (time budget: 80 s left, 90 s needed)", "skipped (time budget: 80 s left, 60 s needed)",
                       "skipped (time budget: 80 s left, 30 s needed)"]


def test_one_process_compile_runs_a_models_two_orders_together_and_whole_or_not_at_all():
    """With --compile one_process a model's repetitions are its estimate's two orders: they run back to back,
    and a budget that holds the first order but not the second starts neither."""
    one = zoo.ONE_PROCESS
    steps = zoo.plan(["a", "b"], ["off", "fast", "off_again"], reps=2, one_process=True, per_mode=False)
    assert steps == [(0, "a", one), (1, "a", one), (0, "b", one), (1, "b", one)]
    now = [0.0]
    budget = zoo.Budget(steps, seconds=250, min_start=30, clock=lambda: now[0], weight=lambda step: 3,
                        whole_reps=True)
    ran, refused = [], []
    for rep, model, _ in steps:
        why = budget.refuse(rep, model, 3)
        if why is None:
            ran.append((rep, model))
            now[0] += 60  # a judging of three modes takes 60 s
            budget.took(model, 60, 3)
        else:
            refused.append(why)
    # a: 180 s for both orders at 30 s a mode, then 90 (three at min_start, above 1.2 x 20); b: 130 s left and
    # 180 needed: neither order starts
    assert ran == [(0, "a"), (1, "a")]
    assert refused == ["skipped (time budget: 130 s left, 180 s needed)",
                       "skipped (the time budget cut this model's other repetitions)"]
    # per repetition (fresh compiles), with the same 130 s left, b's first order would have started alone
    now[0] = 0.0
    budget = zoo.Budget(steps, seconds=250, min_start=30, clock=lambda: now[0], weight=lambda step: 3)
    now[0] = 120.0
    assert budget.refuse(0, "b", 3) is None


def test_quality_report_judges_each_model_by_its_own_bar_on_the_h200_rows(tmp_path):
    """The quality report over the committed H200 runs: a decoder at decode is held to 0.95x off, a prefill
    and an encoder to 0.98x; the frozen modes appear beside the bar's figures, never in the verdict; the
    section goes to ``zoo_quality``, leaving fast mode's ``zoo`` section alone."""
    import os

    from torchgen_ah.evaluation import zoo_quality_report

    runs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "zoo_quality_h200")
    files = ",".join(os.path.join(runs, name) for name in sorted(os.listdir(runs)) if name.endswith(".jsonl"))
    assert zoo_quality_report.step_bar("llama_decode") == (0.95, "decode")
    assert zoo_quality_report.step_bar("bert") == (0.98, "encoder")
    assert zoo_quality_report.step_bar("llama_prefill") == (0.98, "prefill")
    assert zoo_quality_report.step_bar("resnet50_cl") == (1.01, "other")
    assert zoo_quality_report.step_bar("llama_train") == (1.01, "other")
    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("<!-- BEGIN zoo -->\nfast mode's table\n<!-- END zoo -->\n")
    assert zoo.main(["--combine", files, "--report", "quality", "--out", str(tmp_path / "out"),
                     "--results", str(results_md)]) == 0
    text = (tmp_path / "out" / "zoo_quality.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["llama_decode"].endswith("| met |") and "<= 0.95x" in rows["llama_decode"]
    assert "1.38 / 0.791 (2)" in rows["llama_decode"]  # quality_frozen: shown, not judged
    assert "missed: step 1.001x > 0.95x" in rows["qwen2_decode"]
    assert "missed: step 1.018x > 0.98x" in rows["gpt2"]
    assert rows["bert"].endswith("| met |") and "| encoder |" in rows["bert"]
    section = results_md.read_text()
    assert "fast mode's table" in section and "<!-- BEGIN zoo_quality -->" in section
    assert zoo.QUALITY_HEADING in section and "--report quality" in section
