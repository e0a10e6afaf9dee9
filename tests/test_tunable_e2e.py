"""End to end on the CPU path (real Inductor, freezing, packed_linear): tune, write, hit, Default,
wildcards on odd sizes, robustness of the results file, validator rejection.

Two subprocesses, each with a fresh Inductor cache: (1) tuning on, starting from a file of another
torch version (rejected); (2) tuning off, on the written file plus hand edits and broken lines.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from ah_plugin.tunable import results_file as F
from linear_child import PRELUDE, child_env, cpu_artifact

SCRIPT = PRELUDE + textwrap.dedent(
    """
    for m, k, n in json.loads(sys.argv[1]):
        ok, source = compile_linear(m, k, n, 1e-4)
        out["runs"].append({"m": m, "ok": ok, "mkl": "_mkl_linear" in source,
                            "cpp_gemm": "micro_gemm" in source})
    out["benchmarked"] = benchmarked
    out["stats"] = tunable.get_stats()
    out["enabled"] = tunable.is_enabled()
    print("RESULT " + json.dumps(out))
    """
)


def run(tmp_path, shapes, tag, **env_vars):
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"inductor_{tag}"), **env_vars)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(shapes)], env=env,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), proc.stderr


@pytest.mark.slow
def test_tune_then_hit_default_wildcard_and_robustness(tmp_path):
    results = tmp_path / "results0.csv"
    untuned = tmp_path / "untuned0.csv"
    env = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": str(tmp_path / "results%d.csv"),
           "AH_TUNABLE_UNTUNED_FILENAME": str(tmp_path / "untuned%d.csv")}
    key17 = "NN_17_24_40_ld_40_24_float32"

    # A file from another torch: rejected whole (key and both values named), so the shape is tuned.
    validators = F.current_validators()
    stale = "".join(f"Validator,{k},{'0.0.1' if k == 'PT_VERSION' else v}\n" for k, v in validators.items())
    results.write_text(stale.replace('"', "") + f"packed_linear,{key17},Default,0\n")

    # -- process 1: tuning on ------------------------------------------------------------------
    first, err = run(tmp_path, [[17, 40, 24]], "tune", **env)
    assert re.search(rf"{re.escape(str(results))}:1: validator PT_VERSION is '0.0.1' in the file but "
                     rf"'{re.escape(validators['PT_VERSION'])}' in this process", err), err[-3000:]
    assert first["enabled"] and first["runs"][0]["ok"]
    ((op, timed),) = first["benchmarked"]
    assert op == "packed_linear" and len(timed) == 2  # the rejected Default row did not stop tuning
    assert first["stats"]["tuned"] == 1 and first["stats"]["hits"] == 0
    written = F.read_results(str(results), validators)
    assert not written.rejected
    winner = written.entries[("packed_linear", key17)].solution
    assert winner in timed
    assert (tmp_path / "results0.csv.rejected").exists()  # the user's old file is kept aside
    cpp_id = next(cid for cid in timed if cid.startswith("cpp_"))

    # -- hand edits: Default, a wildcard on M, broken lines, a missing validator -----------------
    lines = results.read_text().splitlines()
    lines = [ln for ln in lines if "DEVICE_CAPABILITY" not in ln]  # missing validator: warned, kept
    first_row = len(lines) + 1
    lines += [
        "packed_linear,NN_9_24_40_ld_40_24_float32,Default,0",  # +0 honoured: aten
        f"packed_linear,NN_*_24_40_ld_40_24_float32,{cpp_id},1.0",  # +1 wildcard for odd M
        "packed_linear,NN_5_24_40_ld_40_24_float32",  # +2 truncated
        "packed_linear,NN_6_24_40_ld_40_24_float32,Default,quick",  # +3 non-numeric time
        "conv7d,NN_6_24_40_ld_40_24_float32,Default,0",  # +4 unknown op
        "packed_linear,NN_9_24_40_ld_40_24_float32,extern__mkl_linear,5.0",  # +5 duplicate, slower
    ]
    results.write_text("\n".join(lines) + "\n")

    # -- process 2: tuning off, record untuned ----------------------------------------------------
    second, err = run(tmp_path, [[17, 40, 24], [9, 40, 24], [33, 40, 24], [7, 40, 24], [12, 40, 8]], "hit",
                      AH_TUNABLE_TUNING="0", AH_TUNABLE_RECORD_UNTUNED="1", **env)
    assert second["benchmarked"] == []  # nothing was benchmarked in the whole process
    runs = {r["m"]: r for r in second["runs"]}
    assert all(r["ok"] for r in runs.values()), runs  # correct on every size, wildcard hits included
    assert runs[9]["mkl"] and not runs[9]["cpp_gemm"]  # the edited Default is honoured
    assert runs[33]["cpp_gemm"] and runs[7]["cpp_gemm"]  # the wildcard's choice on odd sizes
    assert runs[12]["mkl"]  # a miss with tuning off: Default
    stats = second["stats"]
    assert (stats["hits"], stats["wildcard_hits"], stats["defaults"], stats["untuned_recorded"]) == (4, 2, 1, 1)
    assert F.read_untuned(str(untuned)) == [("packed_linear", "NN_12_8_40_ld_40_8_float32")]
    for offset, word in ((2, "truncated"), (3, "not a number"), (4, "unknown op"), (5, "another solution")):
        assert f"{results}:{first_row + offset}: " in err and word in err, (offset, word, err[-3000:])
    assert re.search(rf"{re.escape(str(results))}:\d+: missing validator.*DEVICE_CAPABILITY", err)


# A model of the CPU GEMMs that are not packed_linear (freezing, constant weights): an addmm with a full
# bias and a bmm, both autotuned between aten and the C++ GEMM template, which Inductor adds after it asked
# for aten alone.
GEMMS = PRELUDE + textwrap.dedent(
    """
    import os
    class Gemms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 48))
            self.b = torch.nn.Parameter(torch.randn(32, 48))
            self.w3 = torch.nn.Parameter(torch.randn(4, 48, 40))
        def forward(self, x, y):
            return torch.addmm(self.b, x, self.w), torch.bmm(y, self.w3)

    model = Gemms().eval()
    x, y = torch.randn(32, 64), torch.randn(4, 16, 48)
    with torch.no_grad():
        got, code = run_and_get_code(torch.compile(model, mode="max-autotune-no-cudagraphs"), x, y)
        want = model(x, y)
    out["ok"] = all(bool(torch.allclose(g, w, atol=1e-4, rtol=1e-4)) for g, w in zip(got, want))
    out["benchmarked"] = benchmarked
    out["cpp_gemm"] = "\\n".join(code).count("micro_gemm") > 0
    out["stats"] = tunable.get_stats() if tunable.is_enabled() else None
    print("RESULT " + json.dumps(out))
    """
)


def run_gemms(tmp_path, tag, **env_vars):
    env = child_env(**{"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"inductor_{tag}"), **env_vars})
    proc = subprocess.run([sys.executable, "-c", GEMMS], env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), proc.stderr


@pytest.mark.slow
def test_cpu_addmm_and_bmm_rows_hit_on_the_next_run(tmp_path):
    """Rows whose solution is the C++ GEMM template answer the next run: a hit each, nothing benchmarked,
    no miss and no "not among today's candidates" (Inductor first asks with aten alone)."""
    results = tmp_path / "results.csv"
    env = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": str(results)}
    first, _ = run_gemms(tmp_path, "tune", **env)
    assert first["ok"] and first["stats"]["tuned"] == 2 and first["stats"]["misses"] == 2, first
    timed = dict(first["benchmarked"])
    assert sorted(timed) == ["addmm", "bmm"] and all(len(ids) == 2 for ids in timed.values()), timed
    # pin each row to the C++ template (time 0: an edit), whichever won here
    rows = {(e.op, e.params): e for e in F.read_results(str(results), None).entries.values()}
    lines = [line for line in results.read_text().splitlines() if line.startswith("Validator")]
    for (op, params) in rows:
        cpp = next(cid for cid in timed[op] if cid.startswith("cpp_"))
        lines.append(f"{op},{params},{cpp},0")
    results.write_text("\n".join(lines) + "\n")

    second, err = run_gemms(tmp_path, "hit", **env)
    assert second["ok"] and second["cpp_gemm"], second
    assert second["benchmarked"] == []
    stats = second["stats"]
    assert (stats["hits"], stats["misses"], stats["stale"], stats["tuned"]) == (2, 0, 0, 0), stats
    assert "not among today's" not in err, err[-3000:]


@pytest.mark.slow
def test_a_winner_is_timed_under_the_caches_limits_not_taken_from_inductors_cache(tmp_path):
    """A collection run leaves its timings in Inductor's autotune cache; the results cache, tuning a fresh
    file in the same Inductor cache folder, times the candidates again under its own limits: no recorded
    time equals a collected one."""
    shared = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_shared")}
    collected, _ = run_gemms(tmp_path, "collect", TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="addmm,bmm",
                             TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH=str(tmp_path / "collected_{op}.txt"), **shared)
    assert collected["ok"]
    logged = {float(line.rsplit(",", 1)[1]) for op in ("addmm", "bmm")
              for line in (tmp_path / f"collected_{op}.txt").read_text().splitlines()[2:]}
    assert len(logged) == 4  # two choices of each GEMM
    results = tmp_path / "results.csv"
    env = child_env(AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=str(results), AH_TUNABLE_VERBOSE="2", **shared)
    proc = subprocess.run([sys.executable, "-c", GEMMS], env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    tuned = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert tuned["ok"] and tuned["stats"]["tuned"] == 2 and tuned["stats"]["limited"] == 2, tuned
    assert sorted(op for op, _ in tuned["benchmarked"]) == ["addmm", "bmm"]
    recorded = [e.time_ms for e in F.read_results(str(results), None).entries.values()]
    assert len(recorded) == 2
    # the file keeps 6 significant digits: Inductor's cached answer would equal a logged time there (the same
    # measurement); two measurements agree that closely by chance about once in a hundred thousand
    assert not any(f"{t:.6g}" == f"{c:.6g}" for t in recorded for c in logged), (recorded, logged)
    assert "earlier run" not in proc.stderr  # both timed in this process


# backed, but below fast mode's share of 0.8: timed against aten
SUPPORT = '''
    def support(self, features):
        return {{"choice": {template!r}, "inputs": 4, "timings": 16, "margin": 1.5, "spread": 1.1}}
'''


@pytest.mark.slow
def test_use_mode_with_the_cache_records_the_timed_choices_and_hits_them_next_time(tmp_path):
    """USE=mm and the results cache together: where fast mode times the ranking's template against aten, the
    cache records the winner, and the next run hits it (nothing benchmarked). Where the ranking keeps one
    choice, nothing is timed and nothing recorded, and the exit line says so."""
    plain, _ = run_gemms(tmp_path, "plain")
    ids = dict(plain["benchmarked"])
    folder = tmp_path / "artifacts"
    folder.mkdir()
    for op in ("addmm", "bmm"):
        template = next(cid for cid in ids[op] if cid.startswith("cpp_"))
        aten = next(cid for cid in ids[op] if cid.startswith("extern_"))
        name = f"Mine{op.capitalize()}"
        (folder / f"_{name}.py").write_text(cpu_artifact(
            name, op, ids[op], f"return [({template!r}, 0.5), ({aten!r}, 0.5)]",
            precondition="return metadata.get('name') == self.op_name", methods=SUPPORT.format(template=template)))
    env = {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm", "AH_PLUGIN_ARTIFACT_DIR": str(folder),
           "AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": str(tmp_path / "results.csv"), "AH_PLUGIN_VERBOSE": "1"}
    first, _ = run_gemms(tmp_path, "tune", **env)
    assert first["ok"] and sorted((op, sorted(t)) for op, t in first["benchmarked"]) == \
        sorted((op, sorted(t)) for op, t in ids.items())  # the template and aten, timed
    assert (first["stats"]["tuned"], first["stats"]["untimed"]) == (2, 0), first["stats"]
    second, err = run_gemms(tmp_path, "hit", **env)
    assert second["ok"] and second["benchmarked"] == [], second
    assert (second["stats"]["hits"], second["stats"]["misses"]) == (2, 0), second["stats"]
    assert "ah_plugin: at exit: " in err and "results cache: 2 hits, 0 misses, 0 tuned" in err

    # no artifact: fast mode keeps aten alone, nothing is timed, so nothing is recorded, and that is said
    env.update(AH_PLUGIN_ARTIFACT_DIR=str(tmp_path / "empty"), AH_TUNABLE_FILENAME=str(tmp_path / "other.csv"))
    (tmp_path / "empty").mkdir()
    alone, err = run_gemms(tmp_path, "alone", **env)
    assert alone["ok"] and alone["benchmarked"] == [] and alone["stats"]["untimed"] == 2, alone
    assert ("results cache: 0 hits, 2 misses, 0 tuned (2 left with one choice, by the USE ranking: nothing timed, "
            "so nothing recorded)") in err
