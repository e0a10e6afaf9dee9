"""The CPU bar, real Inductor, fresh processes: collect -> train -> use prunes what Inductor benchmarks.

Runs ``python -m ah_plugin.demo --quick``'s loop (so the README's demo is tested too).

With ``freezing`` on, ``x @ self.w`` under ``no_grad`` is lowered as ``packed_linear`` with two real
choices (MKL and the C++ GEMM template). Process A collects with only the environment variables; the
foundation's trainer turns its log into an artifact; process B, with ``USE`` and that artifact, must
leave Inductor one choice, so nothing is benchmarked, and its outputs must equal eager. Without the
plugin acting, B would benchmark both.
"""

from __future__ import annotations

import json

import pytest

from ah_plugin.use import artifact_loader, ranking
from ah_plugin import demo

pytestmark = pytest.mark.slow

OP = "packed_linear"


def _log_inputs(path):
    """(metadata, {input key: {choice: time}}, {input key: features}) of a log, read as plain text."""
    lines = open(path).read().splitlines()
    meta = json.loads(lines[0])
    header = lines[1].split(",")
    names = meta["numerical_features"] + meta["categorical_features"]
    times, feats = {}, {}
    for line in lines[2:]:
        row = dict(zip(header, line.split(",")))
        key = ",".join(row[n] for n in names)
        times.setdefault(key, {})[row["choice"]] = float(row["feedback"])
        feats[key] = {n: (int(row[n]) if n in meta["numerical_features"] else row[n]) for n in names}
    return meta, times, feats


def test_collect_train_use_benchmarks_only_ranked_choices(tmp_path):
    # the demo's quick loop: A collects (environment variables only), the foundation's trainer
    # (generic features) writes an artifact, B uses it; each process has a fresh Inductor cache
    lines = []
    run = demo.run_demo(str(tmp_path), quick=True, out=lines.append)
    assert run["spec"]["op"] == OP
    collected, used = run["results"]["collect"], run["results"]["use"]

    # A: every choice timed and logged for every compiled input; outputs equal eager
    assert collected["matched"], collected["max_abs_err"]
    tunings = [a for a in collected["autotunings"] if a.get("op") == OP]
    assert len(tunings) == 1, collected["autotunings"]
    offered = tunings[0]["offered"]
    assert len(offered) == 2 and any(c.startswith("extern_") for c in offered), offered
    assert sorted(tunings[0]["timed"]) == sorted(offered)
    meta, times, feats = _log_inputs(run["log_path"])
    assert meta["name"] == OP
    assert len(times) == 1  # every compiled input logged ...
    (key,) = times
    assert sorted(times[key]) == sorted(offered)  # ... with every timed choice

    # the trained artifact ranks the measured winner first for that input
    art_dir = str(tmp_path / "artifacts")
    artifact_loader.clear_cache()
    (artifact,) = artifact_loader.load_artifacts((("user", art_dir),))
    assert artifact.path == run["artifact_path"] and artifact.op_name == OP
    top1 = artifact.heuristic.rank(feats[key])[0][0]
    assert top1 == min(times[key], key=times[key].get)

    # B: fast mode (the default, no variable needed) left Inductor one choice, so it benchmarked nothing: the
    # artifact's top choice where its leaf's data back it, else aten (one collection run times each choice
    # once, too little to back a template: aten, as without an artifact)
    assert not any(name.startswith("AH_PLUGIN_TOP_K") for name in used["env"])
    assert used["matched"], used["max_abs_err"]
    assert len(used["autotunings"]) == 1, used["autotunings"]
    aten = next(c for c in offered if c.startswith("extern_"))
    support = artifact.heuristic.support(feats[key])
    assert support["inputs"] == 1 and not ranking.supported(support, top1)
    assert used["autotunings"][0]["offered"] == [aten]
    assert used["autotunings"][0]["timed"] == []
    (stale,) = used["stale"]
    assert stale["artifact"] == artifact.name and stale["vanished"] == [] and stale["unseen"] == []

    # the demo's report: one row per mode, benchmarked counts as observed
    assert [r["mode"] for r in run["rows"]] == ["collect", "use"]
    assert [r["benchmarked"] for r in run["rows"]] == [2, 0]
    assert all(r["wall_s"] > r["compile_s"] > 0 for r in run["rows"])  # the mode's whole time is shown too
    text = "\n".join(lines)
    assert any(line.startswith("| use |") for line in text.splitlines())
    # it says why the CPU runs packed_linear, sets the README's variables, and shows progress as it goes
    assert "On the CPU, Inductor autotunes a GEMM only when its weight is a constant" in text
    assert "-- collect: TORCHINDUCTOR_AUTOHEURISTIC_COLLECT=mm " in text
    assert "-- use: TORCHINDUCTOR_AUTOHEURISTIC_USE=mm " in text
    assert text.count("   compiled in ") == 2 and "torch imported in" in text
    assert "0 choices benchmarked in 1 autotuning," in text  # one autotuning, said as one


def test_the_demo_says_how_long_it_took_and_keeps_its_files(tmp_path):
    """The demo command as a user runs it: its last line gives its time and the folder it kept."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "ah_plugin.demo", "--quick"], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    found = re.fullmatch(r"The demo took \d+ s\. Its log, artifact and results file are kept in (\S+) \(each "
                         r"mode's Inductor cache removed; --workdir DIR keeps them\)", last)
    assert found, last
    folder = found.group(1)
    assert os.path.dirname(folder) == str(tmp_path)
    assert sorted(os.listdir(folder)) == ["artifacts", f"{OP}_log.txt"]
    assert os.listdir(os.path.join(folder, "artifacts")) == ["_PackedLinearRankingDemo.py"]
    shutil.rmtree(folder)


def _train(log_path, name, out_dir):
    """``ah-plugin train-generic LOG --heuristic-name NAME --out DIR``, as the README has the user run it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ah_plugin.report.console", "train-generic", str(log_path),
                           "--heuristic-name", name, "--out", str(out_dir)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out_dir / f"_{name}.py"


def test_a_ranking_trained_on_a_small_noisy_log_compiles_no_slower_than_no_artifact(tmp_path):
    """A user's own MLP (777 -> 1531 -> 333 -> 101) collected once on a loaded CPU (a busy process beside
    it), trained with ``ah-plugin train-generic`` and used: one timing per choice and input stands behind
    each leaf, too little to back a template, so every autotuning leaves Inductor what it leaves without an
    artifact (aten alone, nothing benchmarked), whatever the noisy log put first. The same log with the
    template timed at half aten's time (a load that happened to favour it: the ranking then puts it first
    with a share of 1.0) must not change that."""
    import subprocess
    import sys

    spec = {**demo.workload(False, False), "dims": [777, 1531, 333, 101], "batches": [32]}
    log_path = tmp_path / "mlp_log.txt"
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        collected = demo.run_mode("collect", spec, str(tmp_path), {
            "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT": "mm", "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH": str(log_path)})
    finally:
        busy.kill()
        busy.wait()
    assert collected["matched"] and len(collected["autotunings"]) == 3, collected["autotunings"]
    assert all(len(a["timed"]) == 2 for a in collected["autotunings"])
    meta, times, feats = _log_inputs(log_path)
    assert len(times) == 3 and all(len(t) == 2 for t in times.values())

    lines = log_path.read_text().splitlines()
    favoured = tmp_path / "favoured_log.txt"  # each template timed at half its input's aten time
    aten_ms = {line.rsplit(",", 2)[0]: line.rsplit(",", 1)[1] for line in lines[2:] if ",extern_" in line}
    favoured.write_text("\n".join(lines[:2] + [
        line if ",extern_" in line else f"{line.rsplit(',', 1)[0]},{float(aten_ms[line.rsplit(',', 2)[0]]) / 2}"
        for line in lines[2:]]) + "\n")

    bare = demo.run_mode("bare", spec, str(tmp_path), {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"})
    assert bare["matched"] and len(bare["autotunings"]) == 3
    assert all(a["timed"] == [] and len(a["offered"]) == 1 and a["offered"][0].startswith("extern_")
               for a in bare["autotunings"]), bare["autotunings"]  # no artifact: aten alone, nothing timed
    for name, log in (("NoisyRanking", log_path), ("FavouredRanking", favoured)):
        folder = tmp_path / name
        path = _train(log, name, folder)
        artifact_loader.clear_cache()
        (artifact,) = artifact_loader.load_artifacts(((artifact_loader.SOURCE_USER, str(folder)),))
        assert artifact.path == str(path) and artifact.has_support
        firsts = {key: artifact.rank(f)[0] for key, f in feats.items()}
        if name == "FavouredRanking":
            assert all(choice.startswith("cpp_") and share == 1.0 for choice, share in firsts.values()), firsts
        used = demo.run_mode(name, spec, str(tmp_path), {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm",
                                                           "AH_PLUGIN_ARTIFACT_DIR": str(folder),
                                                           "AH_PLUGIN_VERBOSE": "1"})
        assert used["matched"], used["max_abs_err"]
        # what was kept and benchmarked, autotuning by autotuning, is what no artifact leaves
        assert [(a["offered"], a["timed"]) for a in used["autotunings"]] == \
            [(a["offered"], a["timed"]) for a in bare["autotunings"]], (name, used["autotunings"])
        assert f"ranked by {name}" in used["stderr"]
        templates_first = sum(choice.startswith("cpp_") for choice, _ in firsts.values())
        assert used["stderr"].count("but its data do not back it (") == templates_first, used["stderr"]
        assert used["stderr"].count(" timing(s) behind it") == templates_first  # one timing per input and choice
