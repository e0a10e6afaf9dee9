"""BenchmarkRunner machinery with real worker processes: resumption, fault isolation (exception, hang past
the timeout, killed process), time budget, torchrun-style sharding and the merge.

The per-sample work is a cheap toy (``ToyRunner``) that writes real AutoHeuristic rows through the data
layer's locked appends, so everything but the GPU measurement is the production code path.
This file doubles as the toy's command line: ``python tests/test_datagen_runner.py -o LOG ...``.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ah_plugin.collect.log_format import append_rows, format_row
from torchgen_ah.datagen.benchmark_runner import BenchmarkRunner
from torchgen_ah.datagen.shape_sampler import sample_rng

TOY_METADATA = {
    "shared_memory": 0,
    "device_capa": [0, 0],
    "name": "toy",
    "numerical_features": ["m", "n"],
    "categorical_features": ["kind"],
}
CHOICES = ("extern_toy", "toy_a", "toy_b")


class ToyRunner(BenchmarkRunner):
    """Input i: m drawn from (seed, i), n = i. Faults by index: raise (an OOM), hang, kill (SIGKILL)."""

    name = "toy"
    stage_rows = True

    def add_arguments(self, parser):
        parser.add_argument("--faults", default="", help="index:raise|hang|kill,...")
        parser.add_argument("--sleep", type=float, default=0.0, help="seconds per repetition")
        parser.add_argument("--slow", default="", help="index:seconds,... extra seconds for these inputs")
        parser.add_argument("--group-by-parity", action="store_true", help="batch_key: n % 2")

    def batch_key(self, spec, args):
        return spec["n"] % 2 if args.group_by_parity else None

    def run_batch(self, specs, reps, args, device):
        batch_id = f"{os.getpid()}-{time.monotonic_ns()}"
        return [dict(info, batch_id=batch_id) for info in super().run_batch(specs, reps, args, device)]

    def make_input(self, index, args):
        faults = dict(item.split(":") for item in args.faults.split(",") if item)
        return {"m": sample_rng(args.seed, index, "toy").randint(1, 10**6), "n": index,
                "fault": faults.get(str(index), "")}

    def input_features(self, spec, args):
        return {"m": str(spec["m"]), "n": str(spec["n"]), "kind": "toy"}

    def run_sample(self, spec, reps, args, device):
        fault = spec["fault"]
        if fault == "raise":
            raise RuntimeError("CUDA out of memory. Tried to allocate 1 TiB (toy)")
        if fault == "hang":
            time.sleep(3600)
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        features = self.input_features(spec, args)
        slow = dict(item.split(":") for item in args.slow.split(",") if item)
        time.sleep(float(slow.get(str(spec["n"]), 0.0)))
        for rep in range(reps):
            time.sleep(args.sleep)
            rows = [format_row(TOY_METADATA, features, c, 0.001 * (i + 1) * (rep + 1)) for i, c in enumerate(CHOICES)]
            append_rows(self.write_path, TOY_METADATA, rows)
        return {"pid": os.getpid(), "device": device}


def _journal(log):
    with open(f"{log}.progress.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _rows(log):
    from torchgen_ah.data.ah_log import read_log

    frame = read_log(str(log)).frame
    return frame


def _run(log, *extra, workers=1):
    argv = ["--device", "cpu", "--num-workers", str(workers), "-o", str(log), "--no-progress", *extra]
    runner = ToyRunner()
    args = runner.parse_args(argv)
    return runner.execute(args, argv)


def test_run_then_resume_skips_completed_and_adds_missing_reps(tmp_path):
    log = tmp_path / "toy.txt"
    summary = _run(log, "--num-samples", "6", "--num-reps", "2", workers=2)
    assert summary.ok == 6 and not summary.failed
    frame = _rows(log)
    assert len(frame) == 6 * 2 * len(CHOICES)
    assert sorted(set(frame["n"])) == list(range(6))
    pids = collections.Counter(r["info"]["pid"] for r in _journal(log))
    assert 1 <= len(pids) <= 2 and max(pids.values()) >= 3, "warm workers each measure many inputs"
    assert sorted(os.listdir(f"{log}.workers")) == ["worker0.log", "worker1.log"]

    again = _run(log, "--num-samples", "6", "--num-reps", "2")
    assert again.planned == 0 and again.skipped == 6
    assert len(_rows(log)) == 6 * 2 * len(CHOICES)

    # without the journal, the log's own input keys tell what is done: one more rep each is added
    os.remove(f"{log}.progress.jsonl")
    more = _run(log, "--num-samples", "8", "--num-reps", "3")
    assert more.planned == 8 and more.ok == 8
    frame = _rows(log)
    per_input = frame.groupby(["m", "n", "choice"]).size()
    assert set(per_input.to_numpy().tolist()) == {3}, "each input ends with exactly 3 reps per choice"
    assert {r["reps"] for r in _journal(log) if r["index"] < 6} == {1}
    assert {r["reps"] for r in _journal(log) if r["index"] >= 6} == {3}


def test_faults_are_isolated_logged_with_input_and_skipped(tmp_path):
    log = tmp_path / "faults.txt"
    start = time.monotonic()
    summary = _run(log, "--num-samples", "6", "--num-reps", "1", "--faults", "1:raise,2:hang,3:kill",
                   "--timeout-per-sample", "3")
    assert time.monotonic() - start < 60
    status = {r["index"]: r for r in _journal(log)}
    assert {i: r["status"] for i, r in status.items()} == {
        0: "ok", 1: "oom", 2: "timeout", 3: "crash", 4: "ok", 5: "ok"}
    assert status[1]["input"]["fault"] == "raise" and "out of memory" in status[1]["error"]
    assert "died" in status[3]["error"]
    assert summary.ok == 3 and sum(summary.failed.values()) == 3
    assert sorted(set(_rows(log)["n"])) == [0, 4, 5]
    # a restart does not retry journaled failures by default
    again = _run(log, "--num-samples", "6", "--num-reps", "1", "--faults", "1:raise,2:hang,3:kill")
    assert again.planned == 0
    retry = _run(log, "--num-samples", "6", "--num-reps", "1", "--faults", "1:raise", "--retry-failed")
    assert retry.planned == 3 and retry.ok == 2 and retry.failed["oom"] == 1
    assert sorted(set(_rows(log)["n"])) == [0, 2, 3, 4, 5]


def test_time_budget_stops_cleanly_and_leaves_a_resumable_log(tmp_path):
    log = tmp_path / "budget.txt"
    summary = _run(log, "--num-samples", "40", "--num-reps", "2", "--sleep", "0.3",
                   "--max-minutes", "0.03", "--stop-grace-seconds", "0.5")
    assert summary.seconds < 20
    assert summary.not_started > 0 and summary.ok + summary.interrupted + summary.not_started == 40
    from torchgen_ah.data.ah_log import read_log

    assert read_log(str(log)).skipped == []
    rest = _run(log, "--num-samples", "40", "--num-reps", "2", workers=2)
    # inputs finished before the stop (journaled, or committed by a worker finishing its request) are
    # skipped; the rest are measured now
    assert rest.skipped >= summary.ok and rest.skipped + rest.ok == 40
    per_input = _rows(log).groupby(["n", "choice"]).size()
    assert len(per_input) == 40 * len(CHOICES) and per_input.min() >= 2


def test_torchrun_style_shards_write_one_file_per_rank_and_merge(tmp_path):
    out = tmp_path / "sharded.txt"
    merged = tmp_path / "merged.txt"
    world = 3
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--device", "cpu", "-o", str(out), "--num-samples", "10",
             "--num-reps", "1", "--seed", "4", "--no-progress", "--merge-to", str(merged),
             "--merge-wait-seconds", "60"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output
    for rank in range(world):
        frame = _rows(tmp_path / f"sharded.rank{rank}.txt")
        assert sorted(set(frame["n"])) == [i for i in range(10) if i % world == rank]
    frame = _rows(merged)
    assert sorted(set(frame["n"])) == list(range(10))
    # the shards agree with a single process on what each sample is
    single = tmp_path / "single.txt"
    _run(single, "--num-samples", "10", "--num-reps", "1", "--seed", "4")
    key = lambda f: sorted(zip(f["m"].tolist(), f["n"].tolist(), f["choice"].tolist()))  # noqa: E731
    assert key(frame) == key(_rows(single))


def _launch_ranks(out, world, *extra, ranks=None, run_id=None):
    """Start ranks of a torchrun-style launch of the toy (each a real process); returns their outputs."""
    procs = []
    for rank in range(world) if ranks is None else ranks:
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        env.pop("TORCHELASTIC_RUN_ID", None)
        if run_id:
            env["TORCHELASTIC_RUN_ID"] = run_id
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--device", "cpu", "-o", str(out), "--no-progress", *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    for p in procs:
        output, _ = p.communicate(timeout=180)
        assert p.returncode == 0, output
        outputs.append(output)
    return outputs


def test_ranks_sharing_a_folder_draw_from_one_queue_and_measure_each_input_once(tmp_path):
    """Input 0 takes 8 s, the others 0.05 s: under a static deal its rank would also measure 3 more
    inputs; from the shared queue the other ranks take them. Every input is measured by exactly one
    rank, the ranks' counts add up to one process's, and the merge equals a single process's log."""
    out, merged, world = tmp_path / "q.txt", tmp_path / "merged.txt", 3
    _launch_ranks(out, world, "--num-samples", "12", "--num-reps", "1", "--seed", "4", "--sleep", "0.05",
                  "--slow", "0:8", "--merge-to", str(merged), "--merge-wait-seconds", "120", run_id="job-7")
    per_rank = [sorted(set(_rows(tmp_path / f"q.rank{r}.txt")["n"])) for r in range(world)]
    measured = [n for ns in per_rank for n in ns]
    assert sorted(measured) == list(range(12)), per_rank  # each input once, none lost
    slow_rank = next(ns for ns in per_rank if 0 in ns)
    assert len(slow_rank) < 4, f"the rank stuck on input 0 kept its static share: {per_rank}"
    done = [json.load(open(tmp_path / f"q.rank{r}.txt.done.json")) for r in range(world)]
    assert sum(d["ok"] for d in done) == 12 and sum(d["not_started"] + d["skipped"] for d in done) == 0
    single = tmp_path / "single.txt"
    _run(single, "--num-samples", "12", "--num-reps", "1", "--seed", "4")
    key = lambda f: sorted(zip(f["m"].tolist(), f["n"].tolist(), f["choice"].tolist()))  # noqa: E731
    assert key(_rows(merged)) == key(_rows(single))
    assert not (tmp_path / "q.txt.claims").joinpath("job-7-r0").exists(), "rank 0 removes the claims after merging"
    # a new launch resuming the same output measures nothing again, in either mode: every rank reads
    # every rank's journal and log
    for mode in ("queue", "static"):
        _launch_ranks(out, world, "--num-samples", "12", "--num-reps", "1", "--seed", "4", "--shard", mode,
                      run_id="job-8")
        again = [json.load(open(tmp_path / f"q.rank{r}.txt.done.json")) for r in range(world)]
        assert sum(d["ok"] for d in again) == 0 and sum(d["skipped"] for d in again) == 12, (mode, again)


def test_a_queue_launch_stopped_by_its_budget_resumes_under_the_same_run_id_without_duplicates(tmp_path):
    """The budget stops a launch mid-way (batches finishing during the stop write rows without a journal
    line); every input is counted exactly once across ranks. A relaunch reusing the run id (a restarted
    or requeued job) starts a fresh claims generation instead of honouring stale claims, and finishes
    the rest: every input measured, none twice."""
    out, world, n = tmp_path / "b.txt", 2, 16
    common = ("--num-samples", str(n), "--num-reps", "1", "--seed", "4", "--sleep", "0.4",
              "--batch-size", "2")
    _launch_ranks(out, world, *common, "--max-minutes", "0.03", "--stop-grace-seconds", "5", run_id="job-1")
    first = [json.load(open(tmp_path / f"b.rank{r}.txt.done.json")) for r in range(world)]
    accounted = sum(d["ok"] + d["not_started"] + d["interrupted"] + sum(d["failed"].values()) for d in first)
    assert accounted == n and sum(d["ok"] for d in first) < n, first
    _launch_ranks(out, world, *common, run_id="job-1")
    assert sorted(os.listdir(tmp_path / "b.txt.claims" / "job-1-r0")) == ["g0", "g1"]
    rows = [_rows(tmp_path / f"b.rank{r}.txt") for r in range(world)]
    per_input = collections.Counter(n_ for frame in rows for n_ in frame.groupby(["n", "choice"]).size().index)
    assert sorted({key[0] for key in per_input}) == list(range(n))
    assert set(per_input.values()) == {1}, "an input measured by both launches or both ranks"


def test_an_unusable_claims_folder_falls_back_to_the_static_deal(tmp_path):
    """A file where the claims folder should be (or any OS error there): each rank says so and measures
    its static share; nothing is lost or measured twice."""
    out = tmp_path / "u.txt"
    (tmp_path / "u.txt.claims").write_text("not a folder")
    outputs = _launch_ranks(out, 2, "--num-samples", "6", "--num-reps", "1", run_id="job-2")
    assert all("cannot use the claims folder" in o for o in outputs)
    shares = [sorted(set(_rows(tmp_path / f"u.rank{r}.txt")["n"])) for r in range(2)]
    assert shares == [[0, 2, 4], [1, 3, 5]]


def test_a_rank_alone_in_the_claims_folder_falls_back_to_its_static_share(tmp_path):
    """Rank 1 of 2 never starts (as on a host that does not share the folder): rank 0 waits, says so,
    and measures exactly its static share (batches dealt by estimated work, here every other input)."""
    out = tmp_path / "s.txt"
    (output,) = _launch_ranks(out, 2, "--num-samples", "6", "--num-reps", "1", "--shard-wait-seconds", "1",
                              ranks=[0], run_id="job-9")
    assert "not all 2 ranks seen" in output and "static share" in output
    assert sorted(set(_rows(tmp_path / "s.rank0.txt")["n"])) == [0, 2, 4]


def test_batches_share_a_request_and_a_failed_batch_is_retried_input_by_input(tmp_path):
    log = tmp_path / "batched.txt"
    # 8 inputs in batches of 4 (grouped by parity of n): input 1 raises (an OOM) after other inputs of its
    # batch wrote rows to the staging file; input 6 kills the worker after inputs 0, 2, 4 wrote theirs
    summary = _run(log, "--num-samples", "8", "--num-reps", "2", "--batch-size", "4", "--group-by-parity",
                   "--faults", "1:raise,6:kill", "--timeout-per-sample", "20")
    status = {r["index"]: r for r in _journal(log)}
    assert {i: r["status"] for i, r in status.items()} == {
        0: "ok", 1: "oom", 2: "ok", 3: "ok", 4: "ok", 5: "ok", 6: "crash", 7: "ok"}
    assert summary.ok == 6 and summary.failed == {"oom": 1, "crash": 1}
    frame = _rows(log)
    per_input = frame.groupby(["n", "choice"]).size()
    assert sorted(set(frame["n"])) == [0, 2, 3, 4, 5, 7]
    assert set(per_input.to_numpy().tolist()) == {2}, "no partial or duplicated reps from failed batches"
    # the failed batches' good inputs were retried alone; nothing else was
    assert {i for i, r in status.items() if r["batch"] == 1} == {0, 1, 2, 3, 4, 5, 6, 7}
    clean = tmp_path / "clean.txt"
    _run(clean, "--num-samples", "8", "--num-reps", "1", "--batch-size", "4", "--group-by-parity")
    records = _journal(clean)
    assert {r["batch"] for r in records} == {4}
    assert {tuple(sorted(r["index"] for r in records if r["info"]["batch_id"] == b))
            for b in {r["info"]["batch_id"] for r in records}} == {(0, 2, 4, 6), (1, 3, 5, 7)}


def test_batch_timeout_scales_with_batch_size_and_isolates_the_hanging_input(tmp_path):
    # 3 inputs x 0.5 s = 1.5 s: more than one input's 1.2 s, within the batch's 3 x 1.2 s
    fine = tmp_path / "fine.txt"
    summary = _run(fine, "--num-samples", "3", "--num-reps", "1", "--batch-size", "3", "--sleep", "0.5",
                   "--timeout-per-sample", "1.2")
    assert summary.ok == 3 and [r["batch"] for r in _journal(fine)] == [3, 3, 3]
    log = tmp_path / "hang.txt"
    summary = _run(log, "--num-samples", "3", "--num-reps", "1", "--batch-size", "3", "--sleep", "0.5",
                   "--faults", "2:hang", "--timeout-per-sample", "1.2")
    status = {r["index"]: r["status"] for r in _journal(log)}
    assert status == {0: "ok", 1: "ok", 2: "timeout"}
    assert summary.ok == 2 and sorted(set(_rows(log)["n"])) == [0, 1]


def test_worker_setup_failure_is_reported_not_hung(tmp_path):
    log = tmp_path / "bad.txt"
    argv = ["--device", "cpu", "-o", str(log), "--no-progress", "--num-samples", "2"]
    runner = BrokenSetupRunner()
    code = runner.run(argv)
    assert code == 2


class BrokenSetupRunner(ToyRunner):
    def setup_worker(self, args, device):
        raise ImportError("no such backend (toy)")


if __name__ == "__main__":
    sys.exit(ToyRunner().run())


# The tail of a real compile error journaled on the H200 (paths shortened): the last line is advice.
_DYNAMO_TAIL = """  File "site-packages/torch/_inductor/codecache.py", line 286, in lookup
    precision = torch.get_float32_matmul_precision()
                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch._inductor.exc.InductorError: LoweringException: RuntimeError: PyTorch is checking the matmul precision
  target: aten.mm.default
  args[0]: TensorBox(StorageBox(
  ))RuntimeError: PyTorch is checking the matmul precision without a specific backend name
  target: aten.mm.default
  ))
Found from :
   File "torchgen_ah/mm/gen_data_mm.py", line 351, in _mm_all
    products.append(operands[i] @ operands[i + 1])


Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"
"""


def test_error_headline_names_the_error_not_torchs_advice_line():
    from torchgen_ah.datagen.benchmark_runner import error_headline

    assert error_headline(_DYNAMO_TAIL).startswith("torch._inductor.exc.InductorError: LoweringException: "
                                                   "RuntimeError: PyTorch is checking the matmul precision")
    assert error_headline("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad m\n") \
        == "ValueError: bad m"
    assert error_headline("no result after 120s; worker killed") == "no result after 120s; worker killed"
    assert error_headline("worker died\nSet TORCHDYNAMO_VERBOSE=1 for more") == "worker died"
    assert error_headline("") == ""


def test_launch_id_covers_plain_torchrun_and_restarts():
    """Plain ``torchrun --nproc-per-node N`` has run id "none": the rendezvous address names the launch;
    a restart gets its own folder; outside a launch there is no queue."""
    from torchgen_ah.datagen.distributed import InputClaims

    assert InputClaims.launch_id({"TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "2"}) == "abc-r2"
    assert InputClaims.launch_id({"TORCHELASTIC_RUN_ID": "none", "MASTER_ADDR": "10.0.0.1",
                                  "MASTER_PORT": "29500"}) == "10.0.0.1-29500-r0"
    assert InputClaims.launch_id({"TORCHELASTIC_RUN_ID": "a/b c"}) == "a_b_c-r0"
    assert InputClaims.launch_id({}) is None
