"""gen_data_mm end to end on the CPU path (real Inductor max-autotune of packed_linear through the plugin's
collector, in the runner's warm worker), and the mm feature keys used for resumption."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM, mm_tensor_descriptions
from torchgen_ah.datagen.shape_sampler import MMInput

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mm_input_key_matches_the_plugin_feature_columns():
    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", "x.txt", "--device", "cuda"])  # the GPU path: mm features
    inp = MMInput(64, 128, 96, True, False, "float32", True)
    feats = runner.input_features(inp.to_dict(), args)
    assert feats["m"] == "64" and feats["k"] == "128" and feats["n"] == "96"
    assert (feats["mat1_stride_0"], feats["mat1_stride_1"]) == ("1", "64")  # column-major a
    assert (feats["mat2_stride_0"], feats["mat2_stride_1"]) == ("96", "1")
    assert feats["mat1_iscontig"] == "False" and feats["mat2_iscontig"] == "True"
    assert feats["mat1_dtype"] == "torch.float32" and feats["using_tf32"] == "True"
    bf16 = runner.input_features(MMInput(8, 8, 8, False, True, "bfloat16").to_dict(), args)
    assert bf16["using_tf32"] == "not_float_32"
    assert mm_tensor_descriptions(MMInput(2, 3, 4, False, True, "float16"))[1]["stride"] == [1, 3]


def test_tf32_switch_keeps_torch_precision_apis_consistent():
    """gen_data_mm's TF32 switch must leave torch.get_float32_matmul_precision() readable (Inductor's
    autotune cache lookup calls it on every compile; setting only the per-backend fp32_precision made it
    raise and failed every fp32 input on the H200) and must be what the plugin's feature reads."""
    import torch

    from ah_plugin.inductor.requests import tf32_enabled
    from torchgen_ah.mm.gen_data_mm import _set_tf32

    before = torch.get_float32_matmul_precision()
    try:
        _set_tf32(torch, True)
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 is True
        assert tf32_enabled() is True
        _set_tf32(torch, False)
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cuda.matmul.allow_tf32 is False
        assert tf32_enabled() is False
    finally:
        torch.set_float32_matmul_precision(before)


def test_batches_group_by_dtype_and_tf32_and_respect_memory():
    runner = BenchmarkRunnerMM()
    from torchgen_ah.datagen.benchmark_runner import Task
    from torchgen_ah.mm.gen_data_mm import input_bytes

    args = runner.parse_args(["-o", "x.txt", "--seed", "1"])
    assert args.batch_size == 8
    tasks = [Task(i, runner.make_input(i, args), 3) for i in range(200)]
    assert max(len(b) for b in runner.make_batches(tasks, args)) == 8
    args = runner.parse_args(["-o", "x.txt", "--seed", "1", "--batch-memory-gb", "1"])
    batches = runner.make_batches(tasks, args)
    assert sorted(t.index for b in batches for t in b) == list(range(200))
    for batch in batches:
        kinds = {(MMInput.from_dict(t.spec).dtype, MMInput.from_dict(t.spec).allow_tf32) for t in batch}
        assert len(kinds) == 1, "one dtype and one TF32 setting per batch"
        assert 1 <= len(batch) <= 8
        sizes = [input_bytes(MMInput.from_dict(t.spec)) for t in batch]
        assert len(batch) == 1 or sum(sizes) <= 2**30
    assert max(len(b) for b in batches) >= 2


def test_sampling_is_the_default_and_shapes_file_overrides(tmp_path):
    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", "x.txt", "--seed", "3", "--dtypes", "bf16"])
    assert runner.total_inputs(args) == 1000
    assert {runner.make_input(i, args)["dtype"] for i in range(50)} == {"bfloat16"}
    shapes = tmp_path / "s.csv"
    shapes.write_text("m,k,n,dtype\n4,5,6,fp16\n")
    args = runner.parse_args(["-o", "x.txt", "--shapes", str(shapes)])
    assert runner.total_inputs(args) == 4  # the four layouts
    assert runner.make_input(3, args)["transpose_left"] is True


def test_int8_runs_collect_int_mm_with_the_mm_columns_and_alone():
    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", "x.txt", "--device", "cuda", "--dtypes", "int8"])
    assert runner.collected_op(args, "cuda") == "int_mm"
    assert runner.worker_env(args, "cuda")["TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"] == "int_mm"
    spec = runner.make_input(0, args)
    feats = runner.input_features(spec, args)
    assert feats["mat1_dtype"] == feats["mat2_dtype"] == "torch.int8" and feats["using_tf32"] == "not_float_32"
    assert (feats["mat2_stride_0"], feats["mat2_stride_1"]) == ("1", feats["k"])  # x @ w.t()
    floats = runner.parse_args(["-o", "x.txt", "--device", "cuda", "--dtypes", "bf16"])
    assert runner.collected_op(floats, "cuda") == "mm"


@pytest.mark.parametrize("argv, said", [
    (["--dtypes", "int8,bf16", "--device", "cuda"], "collect them in a run of their own"),
    (["--dtypes", "int8", "--device", "cpu"], "on CUDA only"),
    (["--dtypes", "int4", "--device", "cuda"], "unknown dtype 'int4'"),
    (["--shapes", "torchgen_ah/data/int8_model_shapes.csv", "--device", "cuda"], "is an int_mm input"),
    (["--shapes", "torchgen_ah/data/eval_shapes.csv", "--dtypes", "int8", "--device", "cuda"], "is an mm input"),
])
def test_int8_mixed_with_floats_or_on_the_cpu_is_refused_before_any_work(tmp_path, argv, said):
    out = tmp_path / "rows.txt"
    proc = subprocess.run([sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "-o", str(out), *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not out.exists()


@pytest.mark.slow
def test_cpu_batched_path_logs_every_input_isolates_a_failing_one_and_resumes(tmp_path):
    """Real Inductor max-autotune (packed_linear under freezing, the GEMM Inductor autotunes on the CPU) in
    the warm worker: inputs 0 and 1 share one compiled graph (two autotunings); the batch of 2 and 3 fails
    after its first repetition (an injected compile error for input 3), so both are retried alone and only
    3 is lost, with no rows left from the failed batch."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n"
                      "32,64,48,0,0,fp32,0\n16,128,40,0,0,fp32,0\n64,32,24,0,0,fp32,0\n8,96,56,0,0,fp32,0\n")
    log = tmp_path / "cpu.txt"
    cmd = [sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--device", "cpu", "--shapes", str(shapes),
           "-o", str(log), "--num-reps", "2", "--batch-size", "2", "--no-progress",
           "--timeout-per-sample", "120", "--warmup-reps", "1", "--warmup-mode", "compile"]
    env = dict(os.environ, AH_DATAGEN_INJECT_FAULT="8,96,56")
    env.pop("TORCHINDUCTOR_AUTOHEURISTIC_USE", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = {r["index"]: r for r in (json.loads(l) for l in open(f"{log}.progress.jsonl") if l.strip())}
    assert {i: (r["status"], r["batch"]) for i, r in records.items()} == {
        0: ("ok", 2), 1: ("ok", 2), 2: ("ok", 1), 3: ("error", 1)}, records
    assert "injected fault" in records[3]["error"]
    assert len(records[0]["info"]["compile_seconds"]) == 3  # the warm-up and the 2 logged repetitions
    # the journal says how the worker compiled: precompile threads = its share of the cores (one worker)
    from torchgen_ah.mm.gen_data_mm import usable_cores

    assert records[0]["info"]["precompile_threads"] == usable_cores()
    assert records[0]["info"]["compile_threads"] == usable_cores()  # CPU workers keep Inductor's setting (the env)
    assert records[0]["info"]["shape_padding"] is True  # Inductor's default: --shape-padding auto
    from torchgen_ah.data.ah_log import read_log

    parsed = read_log(str(log))
    assert parsed.metadata["name"] == "packed_linear"
    frame = parsed.frame
    assert sorted(set(frame["in0_size_0"])) == [16, 32, 64], "every input of the batch logged, not input 3"
    assert frame["choice"].nunique() >= 2, "max-autotune timed at least two choices"
    per_choice = frame.groupby(["in0_size_0", "choice"]).size()
    assert set(per_choice.to_numpy().tolist()) == {2}, "each rep re-benchmarked; failed batch left no rows"
    assert (frame["feedback"] != 1.0).all(), "no placeholder time of the compile-only warm-up was logged"
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 inputs done" in again.stderr and "4 skipped" in again.stderr
    assert len(read_log(str(log)).frame) == len(frame)


def test_costly_inputs_run_alone_and_a_cost_budget_excludes_them_without_journaling(tmp_path, capsys):
    from torchgen_ah.datagen.benchmark_runner import RunSummary, Task
    from torchgen_ah.mm.gen_data_mm import estimated_call_ms

    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", str(tmp_path / "log.txt"), "--seed", "0"])
    tasks = [Task(i, runner.make_input(i, args), 2) for i in range(300)]
    costs = {t.index: estimated_call_ms(MMInput.from_dict(t.spec)) for t in tasks}
    assert any(c > args.batch_gpu_ms for c in costs.values()), "the distribution has costly inputs"
    batches = runner.make_batches(tasks, args)
    assert sorted(t.index for b in batches for t in b) == list(range(300))
    for batch in batches:
        if len(batch) > 1:
            assert sum(costs[t.index] for t in batch) <= args.batch_gpu_ms
    assert max(len(b) for b in batches) >= 2

    args = runner.parse_args(["-o", str(tmp_path / "log.txt"), "--seed", "0", "--max-estimated-ms", "100"])
    summary = RunSummary()
    planned = runner.plan(args, str(tmp_path / "log.txt"), list(range(300)), summary)
    over = [i for i, c in costs.items() if c > 100]
    assert over and summary.excluded == len(over)
    assert sorted(t.index for t in planned) == sorted(set(range(300)) - set(over))
    assert not os.path.exists(tmp_path / "log.txt.progress.jsonl")
    said = capsys.readouterr().err
    assert said.count("leaving out inputs") == 1 and f"sample {over[0]} " in said and "ms per call" in said


def test_compile_only_warmup_runs_each_candidate_once_and_restores_inductors_benchmarker():
    from torch._inductor.runtime.benchmarking import benchmarker

    from ah_plugin.inductor.collection import launch_only_benchmarks

    calls = []
    original = benchmarker.benchmark_gpu, benchmarker.benchmark_cpu
    with launch_only_benchmarks():
        assert benchmarker.benchmark_gpu(lambda: calls.append(1)) == 1.0
        assert benchmarker.benchmark_gpu(lambda: calls.append(1), return_mode="all") == [1.0]
        assert benchmarker.benchmark_cpu(lambda: calls.append(1)) == 1.0
    assert calls == [1, 1, 1]
    assert "benchmark_gpu" not in vars(benchmarker) and "benchmark_cpu" not in vars(benchmarker)
    assert benchmarker.benchmark_gpu.__func__ is original[0].__func__
    assert benchmarker.benchmark_cpu.__func__ is original[1].__func__


def test_compile_only_warmup_lets_pad_mm_benchmark_for_real_and_restores_it():
    """pad_mm caches "pad or not" for the logged repetitions: in the warm-up it must get Inductor's real
    benchmarker, not the placeholder that autotuning gets."""
    import functools

    from torch._inductor.fx_passes import pad_mm
    from torch._inductor.runtime.benchmarking import benchmarker

    from ah_plugin.inductor.collection import launch_only_benchmarks, real_pad_decisions

    original = pad_mm.get_do_bench
    decisions = real_pad_decisions()
    assert decisions.usable
    with decisions, launch_only_benchmarks():
        do_bench = pad_mm.get_do_bench()
        assert isinstance(do_bench, functools.partial) and do_bench.keywords == {"warmup": 5}
        assert do_bench.func.__func__ is type(benchmarker).benchmark_gpu  # the real one, not the placeholder
        assert benchmarker.benchmark_gpu(lambda: None) == 1.0  # autotuning still gets the placeholder
    assert pad_mm.get_do_bench is original
    assert "benchmark_gpu" not in vars(benchmarker)


def test_compile_threads_split_the_cores_between_workers_and_local_ranks(monkeypatch):
    from torchgen_ah.mm.gen_data_mm import usable_cores

    runner = BenchmarkRunnerMM()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    args = runner.parse_args(["-o", "x.txt"])
    cores = usable_cores()
    assert runner.worker_env(args, "cuda:0")["TORCHINDUCTOR_COMPILE_THREADS"] == str(cores)
    assert runner.worker_env(args, "cuda:0")["TORCH_WARM_POOL"] == "0"  # default in-process: no pool to warm
    assert "TORCH_WARM_POOL" not in runner.worker_env(args, "cpu")  # CPU workers keep Inductor's setting
    pooled = runner.parse_args(["-o", "x.txt", "--compile-pool", "inductor"])
    assert "TORCH_WARM_POOL" not in runner.worker_env(pooled, "cuda:0")  # Inductor's own pool, warmed
    args = runner.parse_args(["-o", "x.txt", "--num-workers", "2", "--device", "cpu"])
    assert runner.worker_env(args, "cpu")["TORCHINDUCTOR_COMPILE_THREADS"] == str(max(1, cores // 2))
    monkeypatch.setenv("RANK", "3")  # torchrun: 2 ranks on this host, one GPU worker each
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    args = runner.parse_args(["-o", "x.txt"])
    assert runner.worker_env(args, "cuda:1")["TORCHINDUCTOR_COMPILE_THREADS"] == str(max(1, cores // 2))


def test_in_process_compile_pool_turns_inductors_subprocess_pool_off_and_keeps_parallel_precompile(monkeypatch):
    """GPU workers with --compile-pool in-process (the default) get compile_threads 1 (Inductor's subprocess
    pool unused) while autotuning still precompiles in TORCHINDUCTOR_COMPILE_THREADS threads; CPU workers
    and --compile-pool inductor keep Inductor's setting."""
    import torch._inductor.config as ic
    from torch._inductor import select_algorithm
    from torch._inductor.async_compile import AsyncCompile

    from ah_plugin.inductor.collection import compile_in_process, compile_pool_info
    from torchgen_ah.mm.gen_data_mm import compiles_in_process

    runner = BenchmarkRunnerMM()
    own = runner.parse_args(["-o", "x.txt"])
    pooled = runner.parse_args(["-o", "x.txt", "--compile-pool", "inductor"])
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "4")
    select_algorithm.get_num_workers.cache_clear()
    try:
        assert not compiles_in_process(own, "cpu") and not compiles_in_process(pooled, "cuda:0")
        assert compiles_in_process(own, "cuda:0")
        with ic.patch(compile_threads=4):
            assert compile_pool_info() == {"compile_threads": 4, "precompile_threads": 4}
            compile_in_process()
            assert compile_pool_info() == {"compile_threads": 1, "precompile_threads": 4}
            assert not AsyncCompile.use_process_pool()
    finally:
        select_algorithm.get_num_workers.cache_clear()


@pytest.mark.slow
def test_workers_sharing_a_device_take_turns_and_compile_outside_their_turn(tmp_path):
    """Two real CPU workers with --exclusive-timing (what --workers-per-gpu 2 does on a GPU): operand
    creation, the warm-up's graph run and each logged repetition hold the device lock; the warm-up's
    compile does not. No two held intervals overlap, and every input is logged completely."""
    shapes = tmp_path / "shapes.csv"  # one input per worker, both started at once
    shapes.write_text("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n"
                      "32,64,48,0,0,fp32,0\n16,128,40,0,0,fp32,0\n")
    log = tmp_path / "shared.txt"
    cmd = [sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--device", "cpu", "--shapes", str(shapes),
           "-o", str(log), "--num-reps", "2", "--batch-size", "1", "--no-progress", "--num-workers", "2",
           "--exclusive-timing", "--timeout-per-sample", "120", "--warmup-reps", "1", "--warmup-mode", "compile"]
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_AUTOHEURISTIC_USE", "AH_DATAGEN_INJECT_FAULT")}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in open(f"{log}.progress.jsonl") if line.strip()]
    assert sorted(r["index"] for r in records) == [0, 1] and {r["status"] for r in records} == {"ok"}
    intervals = []
    for record in records:
        info = record["info"]
        # operands, the warm-up's autotuning tensors and graph run, the 2 logged repetitions: the warm-up's
        # compile itself is outside
        assert len(info["lock_intervals"]) >= 4, info
        assert info["lock_held_seconds"] < sum(info["compile_seconds"]), info
        intervals += info["lock_intervals"]
    intervals.sort()
    for (_, end), (start, _) in zip(intervals, intervals[1:]):
        assert start >= end - 1e-3, f"two workers held the device at once: {intervals}"
    from torchgen_ah.data.ah_log import read_log

    frame = read_log(str(log)).frame
    per_choice = frame.groupby(["in0_size_0", "choice"]).size()
    assert sorted(set(frame["in0_size_0"])) == [16, 32]
    assert set(per_choice.to_numpy().tolist()) == {2} and (frame["feedback"] != 1.0).all()


def test_a_killed_lock_holder_does_not_block_the_other_worker(tmp_path):
    from torchgen_ah.datagen.device_lock import DeviceLock

    path = str(tmp_path / "dev.lock")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        "from torchgen_ah.datagen.device_lock import DeviceLock\n"
        "with DeviceLock(%r).held():\n    print('held', flush=True); time.sleep(600)\n") % path],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        lock = DeviceLock(path)
        import threading

        got = threading.Event()

        def wait_for_the_lock():
            with lock.held():
                got.set()

        waiter = threading.Thread(target=wait_for_the_lock, daemon=True)
        waiter.start()
        assert not got.wait(1.0), "the lock was not exclusive"
        holder.kill()
        assert got.wait(10.0), "a killed holder kept the lock"
    finally:
        holder.kill()
        holder.wait()


_SPY_SCRIPT = """
import json, sys
from torch._inductor.select_algorithm import AlgorithmSelectorCache
from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM

runner = BenchmarkRunnerMM()
seen = []  # (step, whether this worker held the device lock)
for name in ("benchmark_example_value", "benchmark_choices"):
    descriptor = vars(AlgorithmSelectorCache)[name]
    kind = type(descriptor)
    def spy(*args, _f=descriptor.__func__, _name=name, **kwargs):
        seen.append((_name, runner._lock.is_held))
        return _f(*args, **kwargs)
    setattr(AlgorithmSelectorCache, name, kind(spy))
args = runner.parse_args(["--device", "cpu", "--warmup-reps", "1", "--warmup-mode", "compile", "-o", sys.argv[1]])
runner.setup_worker(args, "cpu")
runner.run_batch([{"m": 32, "k": 64, "n": 48, "transpose_left": False, "transpose_right": False,
                   "dtype": "float32", "allow_tf32": False}], 1, args, "cpu")
print("SEEN " + json.dumps(seen))
"""


@pytest.mark.slow
def test_autotuning_device_work_of_a_warmup_waits_for_the_workers_turn(tmp_path):
    """The review of the turn-taking found the warm-up creating autotuning's example inputs (random fills)
    and zeroing outputs outside the lock. With a spy under the hooks: every such step holds the lock, in
    the warm-up (compiled outside the turn) as in the logged repetition."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env.update(AH_DATAGEN_DEVICE_LOCK=str(tmp_path / "device.lock"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    proc = subprocess.run([sys.executable, "-c", _SPY_SCRIPT, str(tmp_path / "log.txt")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads([line for line in proc.stdout.splitlines() if line.startswith("SEEN ")][-1][5:])
    steps = {name for name, _ in seen}
    assert steps == {"benchmark_example_value", "benchmark_choices"}, seen  # both ran (warm-up and rep)
    assert all(held for _, held in seen), seen


def test_core_slices_of_ranks_sharing_a_host_are_disjoint_and_match_compile_threads(monkeypatch):
    """Two workers per GPU under torchrun with 2 ranks on the host: the 4 workers get 4 disjoint slices,
    each as large as the compile threads gen_data_mm gives a worker."""
    from torchgen_ah.datagen.benchmark_runner import worker_core_slices
    from torchgen_ah.datagen.distributed import RankInfo

    cores = sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    ranks = [worker_core_slices(2, RankInfo(rank=r, world_size=2, local_rank=r, under_launcher=True,
                                            local_world_size=2)) for r in (0, 1)]
    flat = [c for slices in ranks for cores_of_worker in slices for c in cores_of_worker]
    assert len(flat) == len(set(flat)) == 16 and all(len(s) == 4 for r in ranks for s in r)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.setenv(name, {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}[name])
    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", "x.txt", "--device", "cuda", "--workers-per-gpu", "2"])
    assert runner.worker_env(args, "cuda:1")["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    assert cores  # the real affinity was readable (Linux)


def test_torchrun_static_deal_covers_every_input_once_and_balances_estimated_work():
    """Without a shared queue, ranks take fixed shares: batches (as one process forms them) dealt heaviest
    first to the least-loaded rank. Every sample lands on exactly one rank, excluded ones too, and the
    ranks' estimated work differs by at most one batch's."""
    from torchgen_ah.datagen.benchmark_runner import Task
    from torchgen_ah.datagen.distributed import RankInfo, deal_by_work

    runner = BenchmarkRunnerMM()
    args = runner.parse_args(["-o", "x.txt", "--num-samples", "200", "--first-sample", "5000", "--batch-size", "2",
                              "--max-estimated-ms", "20", "--num-reps", "2"])
    world = 3
    shares = [runner.rank_indices(args, RankInfo(r, world, r, True, world)) for r in range(world)]
    assert sorted(i for s in shares for i in s) == list(range(5000, 5200))
    kept = [runner.make_input(i, args) for i in range(5000, 5200)]
    tasks = {i: spec for i, spec in zip(range(5000, 5200), kept) if runner.exclude_reason(spec, args) is None}
    assert 0 < len(tasks) < 200, "the cost cap leaves some samples out"
    batches = runner.make_batches([Task(i, spec, 2) for i, spec in tasks.items()], args)
    weight = {b[0].index: runner.work_estimate(b, args) for b in batches}
    loads = [sum(w for first, w in weight.items() if first in s) for s in shares]
    assert max(loads) - min(loads) <= max(weight.values()), loads
    assert deal_by_work([([1], 5.0), ([2], 3.0), ([3], 2.0), ([4], 1.0)], 2) == [[1, 4], [2, 3]]  # loads 6, 5


def test_a_replay_run_whose_log_says_per_call_is_reported(tmp_path, capsys):
    """gen_data_mm --timing replay on a GPU: a log whose metadata lacks the replay mark is said to be
    per-call data (the collection's timing did not take effect); a replay-marked log and CPU runs are quiet."""
    import argparse

    from torchgen_ah.mm.gen_data_mm import BenchmarkRunnerMM

    runner = BenchmarkRunnerMM()
    log = tmp_path / "mm.txt"
    for meta, device, warned in (({"name": "mm"}, None, True), ({"name": "mm", "timing": "cudagraph_replay"}, None,
                                                                False), ({"name": "mm"}, "cpu", False)):
        log.write_text(json.dumps(meta) + "\nm,k,n,choice,feedback\n")
        runner.finish(argparse.Namespace(timing="replay", device=device), str(log), None)
        err = capsys.readouterr().err
        assert ("timed per call, not by CUDA-graph replay" in err) is warned, (meta, device, err)
        if warned:
            assert f"{log}:1:" in err


@pytest.mark.slow
def test_shape_padding_off_reaches_the_worker_and_its_journal(tmp_path):
    """--shape-padding off switches Inductor's pad_mm pass off in the worker process itself (on a GPU the
    unaligned GEMM is then autotuned and logged unpadded), and each input's journal entry says so."""
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,k,n,transpose_left,transpose_right,dtype,allow_tf32\n32,64,6,0,0,fp32,0\n")
    log = tmp_path / "cpu.txt"
    cmd = [sys.executable, "-m", "torchgen_ah.mm.gen_data_mm", "--device", "cpu", "--shapes", str(shapes),
           "-o", str(log), "--num-reps", "1", "--no-progress", "--warmup-reps", "0", "--shape-padding", "off"]
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_AUTOHEURISTIC_USE"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [record] = [json.loads(line) for line in open(f"{log}.progress.jsonl") if line.strip()]
    assert record["status"] == "ok" and record["info"]["shape_padding"] is False
