"""benchmarks/process_state.py: it needs a GPU and says so; its table of several processes is rebuilt from
the committed JSON rows of the H200 run, one column per process."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "benchmarks", "process_state.py")
COMMITTED = os.path.join(REPO, "tests", "data", "process_state_llama_decode.json")


def run(*args, env=None):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=REPO)


def test_without_a_gpu_it_refuses_in_words():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = run("--model", "llama_decode", "--no-write", env=env)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr


def test_the_table_of_the_committed_processes(tmp_path):
    results = tmp_path / "RESULTS.md"
    proc = run("--from-json", COMMITTED, "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    with open(COMMITTED, encoding="utf-8") as f:
        runs = [json.loads(line)["rows"] for line in f if line.strip()]
    assert len(runs) == 3
    text = results.read_text()
    assert "<!-- BEGIN process_state_llama_decode -->" in text and "3 fresh process(es)" in text
    header = next(line for line in text.splitlines() if line.startswith("| after"))
    assert header.count("process ") == 3
    row = next(line for line in text.splitlines() if line.startswith("| off_compile"))
    ratios = [float(cell.split("(")[1].rstrip(") ")) for cell in row.split("|")[2:-1]]
    assert ratios == [round(r[2]["step_ms"] / r[0]["step_ms"], 3) for r in runs]


def test_a_json_file_without_runs_is_refused_naming_it(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    proc = run("--from-json", str(empty), "--no-write")
    assert proc.returncode == 2 and f"{empty}: no runs" in proc.stderr
    bad = tmp_path / "bad.json"
    with open(COMMITTED, encoding="utf-8") as f:
        first = f.readline()
    bad.write_text(first + "{not json\n")
    proc = run("--from-json", str(bad), "--no-write")
    assert proc.returncode == 2 and f"{bad}:2: not a process_state run" in proc.stderr


def test_runs_with_and_without_a_phase_share_one_table_by_phase_name(tmp_path):
    with open(COMMITTED, encoding="utf-8") as f:
        entry = json.loads(f.readline())
    newer = dict(entry, rows=entry["rows"][:2] + [{"phase": "plain_compile", "step_ms": 0.5}] + entry["rows"][2:])
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps(entry) + "\n" + json.dumps(newer) + "\n")
    proc = run("--from-json", str(mixed), "--no-write")
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [line.split("|")[1].strip() for line in table] == \
        ["first", "again", "plain_compile", "off_compile", "replay_aten", "fast_compile", "again_end"]
    plain = next(line for line in table if line.startswith("| plain_compile"))
    assert plain.split("|")[2].strip() == "-" and plain.split("|")[3].strip().startswith("0.5000")
    off = next(line for line in table if line.startswith("| off_compile"))
    assert off.split("|")[2].strip() == off.split("|")[3].strip()  # matched by name, not by position


def test_an_unknown_phase_is_refused_before_any_gpu_work():
    proc = run("--phases", "again,side_stream,warp_drive", "--no-write", env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 2 and "unknown phase warp_drive" in proc.stderr


def test_off_and_fast_processes_with_their_explaining_fields(tmp_path):
    """Each process is labelled by how it compiled the model; the fields beside the step (the model's graph
    replayed alone, ...) get a table each, with "-" where an older run did not record them."""
    with open(COMMITTED, encoding="utf-8") as f:
        old = json.loads(f.readline())
    rows = [{"phase": "first", "step_ms": 0.46, "graph_ms": 0.45, "nogc_ms": 0.46, "host_us": 300.0,
             "gc_objects": 1000, "graph_functions": 1},
            {"phase": "side_add", "step_ms": 0.48, "graph_ms": 0.47, "nogc_ms": 0.48, "host_us": 310.0,
             "gc_objects": 1000, "graph_functions": 1}]
    new = dict(old, first="fast", rows=rows)
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    proc = run("--from-json", str(path), "--no-write")
    assert proc.returncode == 0, proc.stderr
    assert "| after | process 1 (off) | process 2 (fast) |" in proc.stdout
    graph_table = proc.stdout.split("The model's CUDA graph replayed alone")[1]
    side = next(line for line in graph_table.splitlines() if line.startswith("| side_add"))
    assert side.split("|")[2].strip() == "-" and side.split("|")[3].strip() == "0.4700 (1.044)"
