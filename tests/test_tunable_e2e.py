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
from linear_child import PRELUDE, child_env

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
