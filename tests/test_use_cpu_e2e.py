"""The CPU bar, real Inductor, fresh processes: collect -> train -> use prunes what Inductor benchmarks.

Runs ``python -m ah_plugin.demo --quick``'s loop (so the README's demo is tested too).

With ``freezing`` on, ``x @ self.w`` under ``no_grad`` is lowered as ``packed_linear`` with two real
choices (MKL and the C++ GEMM template). Process A collects with only the environment variables; the
foundation's trainer turns its log into an artifact; process B, with ``USE`` and that artifact, must
leave Inductor exactly the artifact's top choice (k=1, aten not forced, floor 1), so nothing is
benchmarked, and its outputs must equal eager. Without the plugin acting, B would benchmark both.
"""

from __future__ import annotations

import json

import pytest

from ah_plugin.use import artifact_loader
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

    # B: fast mode (the default, no variable needed) left Inductor exactly the artifact's top choice, so
    # it benchmarked nothing: the one-choice path on the CPU's packed_linear
    assert not any(name.startswith("AH_PLUGIN_TOP_K") for name in used["env"])
    assert used["matched"], used["max_abs_err"]
    assert len(used["autotunings"]) == 1, used["autotunings"]
    assert used["autotunings"][0]["offered"] == [top1]
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
