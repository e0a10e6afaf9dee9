"""BenchmarkRunner: the driver shared by data generators (``gen_data_mm`` and friends).

A generator subclasses ``BenchmarkRunner`` and supplies what one sample is (``make_input``), how to
measure it inside a worker process (``setup_worker``/``run_sample``) and, for resumption, which log
features identify it (``input_features``). The base class does the rest:

* the upstream command line (``--device``, ``--use-heuristic``, ``-o``, ``--num-samples``, ``--num-reps``)
  plus ``--seed``, ``--first-sample``, ``--num-gpus``/``--devices``/``--num-workers``,
  ``--timeout-per-sample``, ``--max-minutes``, ``--retry-failed``, ``--merge-to``;
* warm worker processes (one per GPU, or ``--workers-per-gpu`` N taking turns on it through
  ``device_lock``, each pinned to its own slice of the cores): torch is imported once per worker, not
  once per sample;
* batches (``--batch-size``): a worker measures several inputs per request (one compiled graph for the
  mm generator); a batch that fails in any way is retried input by input, so only the bad input is
  skipped. With ``stage_rows`` the worker sends a batch's rows to a staging file and appends them to the
  log only when the whole batch succeeded, so a failed batch never leaves partial repetitions behind;
* fault isolation: an exception (OOM, compile failure) is reported by the worker and the run goes on;
  a sample past ``--timeout-per-sample`` or a worker that dies (segfault, os._exit) gets its process
  group killed and a fresh worker; either way the failure is journaled with the input and skipped;
* resumption: a restart appends to the same log and skips inputs already complete there (the log's input
  keys, counting repetitions already written) or already journaled;
* determinism: sample ``i`` is a pure function of (seed, i), so shards and restarts agree;
* sharding under torchrun (see ``torchgen_ah.datagen.distributed``) and a clean stop at a time budget.

Files next to the log ``OUT`` (per rank): ``OUT.progress.jsonl`` (one JSON line per finished sample:
index, input, status, seconds, error) and ``OUT.workers/worker<K>.log`` (the workers' stdout/stderr).

The parent process imports neither torch nor pandas unless the log already exists (resumption).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field

from tqdm import tqdm

from ah_plugin.report import command_line
from torchgen_ah.datagen import distributed
from torchgen_ah.datagen.device_lock import ENV_DEVICE_LOCK
from torchgen_ah.data.log_files import refuse_compressed_output

STATUS_OK = "ok"
FAILURE_KINDS = ("error", "oom", "compile_error", "timeout", "crash")

_TAIL_BYTES = 4000
ENV_CPU_CORES = "AH_DATAGEN_CPU_CORES"  # cores a worker pins itself to (workers sharing a device)


class WorkerStartError(RuntimeError):
    """A worker process could not be started or set up (bad arguments, no GPU, import error)."""


@dataclass
class Task:
    index: int
    spec: dict
    reps: int
    key: str | None = None
    solo: bool = False  # retried alone after its batch failed


Batch = list  # list[Task]: measured by one worker request


@dataclass
class RunSummary:
    planned: int = 0
    skipped: int = 0
    ok: int = 0
    failed: dict = field(default_factory=lambda: collections.Counter())
    not_started: int = 0
    interrupted: int = 0
    excluded: int = 0
    seconds: float = 0.0
    log_path: str = ""

    def as_dict(self) -> dict:
        """The fields as plain JSON data (``failed`` a plain dict, seconds rounded to the millisecond)."""
        return {**self.__dict__, "failed": dict(self.failed), "seconds": round(self.seconds, 3)}


class BenchmarkRunner:
    """Base class of data generators. Subclasses set ``name`` and override the hooks below."""

    name = "benchmark"
    command = "python -m torchgen_ah.datagen.benchmark_runner"  # how the user runs it (its --help says so)
    description = "Generate AutoHeuristic data."
    default_batch_size = 1  # inputs per worker request unless --batch-size says otherwise
    stage_rows = False  # True: rows of a request go to a staging file, appended to the log on success
    log_path_env: str | None = None  # environment variable the worker points at the staging file

    def __init__(self) -> None:
        self.parser = self.build_parser()
        self.log_path: str | None = None  # in a worker: the log this rank writes (set before setup_worker)
        self.write_path: str | None = None  # in a worker: where this request's rows go (log or staging)

    # --- command line --------------------------------------------------------------------------------

    def build_parser(self) -> argparse.ArgumentParser:
        p = command_line.parser(self.command, self.description + (
            " Options are grouped: the common ones first; workers, time limits and several hosts after."))
        what = p.add_argument_group("what to measure, and where the rows go")
        what.add_argument("--device", default=None,
                          help="'cuda' (GPU 0 or the ones chosen below), a GPU index (upstream: "
                               "torch.cuda.set_device(i)), or 'cpu' (default: cuda when this machine has an "
                               "NVIDIA GPU, else cpu)")
        what.add_argument("-o", dest="output", default="ah_data.txt",
                          help="log file the collector appends to (per rank: OUT.rank<R>.txt under torchrun)")
        what.add_argument("--num-samples", type=int, default=None,
                          help="number of inputs, across all ranks (default 1000; with a shapes file: all)")
        what.add_argument("--num-reps", type=int, default=3, help="measurements per input")
        what.add_argument("--seed", type=int, default=0, help="sample i is a pure function of (seed, i)")
        what.add_argument("--first-sample", type=int, default=0,
                          help="index of the first sample (later batches continue where earlier ones stopped)")
        what.add_argument("--use-heuristic", action="store_true",
                          help="use the learned heuristic instead of collecting data (upstream flag)")
        what.add_argument("--no-progress", action="store_true", help="no tqdm progress bar (logs, CI)")
        self.add_arguments(p.add_argument_group(f"{self.name} inputs and timing"))
        workers = p.add_argument_group("workers and devices")
        workers.add_argument("--num-gpus", type=int, default=None, help="one worker per GPU 0..N-1 of this host")
        workers.add_argument("--devices", default=None, help="GPU indices for the workers, e.g. 0,2,5")
        workers.add_argument("--num-workers", type=int, default=1, help="worker processes with --device cpu")
        workers.add_argument("--workers-per-gpu", type=int, default=1,
                             help="worker processes per GPU (2: one compiles its next batch while the other "
                                  "times; they take turns on the GPU, see --exclusive-timing, and split the cores)")
        workers.add_argument("--exclusive-timing", action="store_true",
                             help="workers sharing a device take turns in everything that runs on it (automatic "
                                  "with --workers-per-gpu > 1; with --device cpu it only tests the protocol, since "
                                  "CPU timings share cores with the other workers' compiles)")
        workers.add_argument("--batch-size", type=int, default=None,
                             help=f"inputs measured per worker request (default {self.default_batch_size}); "
                                  "a failed batch is retried input by input")
        limits = p.add_argument_group("time limits")
        limits.add_argument("--timeout-per-sample", type=float, default=300.0,
                            help="seconds one input (all its reps) may take before its worker is killed "
                                 "(a batch gets this times its size)")
        limits.add_argument("--worker-start-timeout", type=float, default=600.0,
                            help="seconds a worker may take to import and set up")
        limits.add_argument("--max-minutes", type=float, default=None,
                            help="stop starting inputs after this many minutes; in-flight ones get "
                                 "--stop-grace-seconds more, then are killed (the log stays valid and resumable)")
        limits.add_argument("--stop-grace-seconds", type=float, default=30.0,
                            help="after --max-minutes, seconds the inputs already started may take to finish "
                                 "before their workers are killed")
        hosts = p.add_argument_group("resuming, and several hosts (torchrun)")
        hosts.add_argument("--retry-failed", action="store_true",
                           help="on resume, run again inputs journaled as failed (by default they are skipped)")
        hosts.add_argument("--merge-to", default=None,
                           help="rank 0 merges all ranks' logs into this file at the end (shared filesystem)")
        hosts.add_argument("--merge-wait-seconds", type=float, default=600.0,
                           help="with --merge-to: how long rank 0 waits for the other ranks to finish before "
                                "merging the logs that are done")
        hosts.add_argument("--shard", choices=("queue", "static"), default="queue",
                           help="under torchrun: 'queue' (default) ranks whose output folder is shared draw "
                                "inputs from one queue (claim files in OUT.claims/<launch>/g<n>/), falling back "
                                "to 'static' when not all ranks show up there; 'static': each rank measures a "
                                "fixed share, batches dealt by estimated work")
        hosts.add_argument("--shard-wait-seconds", type=float, default=60.0,
                           help="how long a rank waits for the others to appear in the claims folder")
        return p

    def parse_args(self, argv=None) -> argparse.Namespace:
        args = self.parser.parse_args(argv)
        if args.num_reps < 1:
            self.parser.error("--num-reps must be >= 1")
        if args.num_samples is not None and args.num_samples < 0:
            self.parser.error("--num-samples must be >= 0")
        if args.timeout_per_sample <= 0:
            self.parser.error("--timeout-per-sample must be > 0")
        if args.batch_size is None:
            args.batch_size = self.default_batch_size
        if args.device is None:
            args.device = distributed.default_device()
        if args.batch_size < 1:
            self.parser.error("--batch-size must be >= 1")
        try:
            refuse_compressed_output(args.output)
        except ValueError as exc:
            self.parser.error(str(exc))
        return args

    # --- hooks for subclasses --------------------------------------------------------------------------

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add generator-specific flags."""

    def total_inputs(self, args) -> int:
        """How many inputs the run covers (indices first_sample .. first_sample+N-1)."""
        return 1000 if args.num_samples is None else args.num_samples

    def make_input(self, index: int, args) -> dict:
        """Input ``index`` as a JSON-serialisable dict; must depend only on (args.seed, index, args)."""
        raise NotImplementedError

    def input_features(self, spec: dict, args) -> dict | None:
        """The log's feature columns of ``spec`` as the log writes them (text), so that resumption can find
        the input's rows; None when rows cannot be matched (then only the journal counts)."""
        return None

    def describe_input(self, spec: dict) -> str:
        return json.dumps(spec, sort_keys=True)

    def worker_env(self, args, device: str) -> dict:
        """Extra environment for a worker process (read before it imports torch)."""
        return {}

    def setup_worker(self, args, device: str) -> None:
        """Runs once in each worker process before its first sample (import torch, pick the GPU, ...)."""

    def run_sample(self, spec: dict, reps: int, args, device: str) -> dict | None:
        """Measure one input ``reps`` times inside a worker. Raise on failure. Returns optional info."""
        raise NotImplementedError

    def run_batch(self, specs: list[dict], reps: int, args, device: str) -> list:
        """Measure several inputs ``reps`` times each inside a worker; one info (or None) per input.
        Raise on any failure: the runner then retries the inputs one by one. The default measures them
        in turn with ``run_sample``; a generator overrides it to share work between the inputs."""
        return [self.run_sample(spec, reps, args, device) for spec in specs]

    def batch_key(self, spec: dict, args):
        """Inputs with different keys never share a batch (e.g. dtype, or a global flag like TF32)."""
        return None

    def batch_weight(self, spec: dict, args) -> float:
        """What an input costs a batch (e.g. bytes of GPU memory); see ``batch_weight_limit``."""
        return 0.0

    def batch_weight_limit(self, args) -> float:
        """A batch's inputs together stay within this weight (an input heavier than it runs alone)."""
        return float("inf")

    def work_estimate(self, batch: Batch, args) -> float:
        """Relative time a batch takes to measure; under a launcher ranks get batches of equal total work."""
        return float(len(batch))

    def exclude_reason(self, spec: dict, args) -> str | None:
        """Why an input is left out of this run (e.g. over a cost budget), or None to measure it. Excluded
        inputs are counted, not journaled: a later run with other options still measures them."""
        return None

    def classify_error(self, exc: BaseException) -> str:
        """One of "oom", "compile_error", "error" for an exception raised by run_sample."""
        text = f"{type(exc).__name__}: {exc}".lower()
        if "outofmemory" in text.replace(" ", "") or "out of memory" in text:
            return "oom"
        if any(word in text for word in ("backendcompilerfailed", "inductorerror", "compile")):
            return "compile_error"
        return "error"

    def after_failure(self, exc: BaseException, args, device: str) -> None:
        """Called in the worker after run_sample raised (free GPU memory, reset compiler state)."""

    def finish(self, args, log_path: str, summary: RunSummary) -> None:
        """Called in the parent at the end of the run."""

    # --- paths --------------------------------------------------------------------------------------------

    @staticmethod
    def journal_path(log_path: str) -> str:
        return f"{log_path}.progress.jsonl"

    @staticmethod
    def worker_log_dir(log_path: str) -> str:
        return f"{log_path}.workers"

    # --- resumption --------------------------------------------------------------------------------------

    @staticmethod
    def read_journal(path: str) -> dict[int, dict]:
        """Last journal record per sample index; a torn or corrupt line is skipped with a warning."""
        records: dict[int, dict] = {}
        if not os.path.exists(path):
            return records
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    records[int(record["index"])] = record
                except (ValueError, KeyError, TypeError):
                    print(f"warning: {path}:{lineno}: unreadable journal line skipped", file=sys.stderr)
        return records

    @staticmethod
    def reps_in_log(log_path: str) -> tuple[dict[str, int], list[str]]:
        """Repetitions already written per input key (the most rows any one choice of the input has),
        and the log's feature columns in file order. Empty when the log does not exist yet."""
        if not os.path.exists(log_path) or os.path.getsize(log_path) == 0:
            return {}, []
        # lazy: pandas only when resuming from a log (the parent of a fresh run imports neither it nor torch)
        from torchgen_ah.data.ah_log import feature_columns, input_keys, read_log

        log = read_log(log_path)
        features = set(feature_columns(log.metadata))
        columns = [c for c in log.frame.columns if c in features]
        if not len(log.frame):
            return {}, columns
        keys = input_keys(log.frame, log.metadata)
        counts = collections.Counter(zip(keys.tolist(), log.frame["choice"].tolist()))
        reps: dict[str, int] = {}
        for (key, _choice), count in counts.items():
            reps[key] = max(reps.get(key, 0), count)
        return reps, columns

    def input_key(self, spec: dict, args, columns: list[str]) -> str | None:
        features = self.input_features(spec, args)
        if features is None or not columns:
            return None
        try:
            return ",".join(str(features[c]) for c in columns)
        except KeyError:
            return None

    def progress(self, log_paths) -> tuple[dict[int, dict], dict[str, int], list[str]]:
        """What earlier runs left in ``log_paths`` (one log, or every rank's): journal records by index (an
        ok record wins over a failed one), repetitions written per input key (summed over the logs), and
        the log's feature columns."""
        journal: dict[int, dict] = {}
        reps: collections.Counter = collections.Counter()
        columns: list[str] = []
        for path in [log_paths] if isinstance(log_paths, str) else log_paths:
            for index, record in self.read_journal(self.journal_path(path)).items():
                if index not in journal or record.get("status") == STATUS_OK:
                    journal[index] = record
            done, found = self.reps_in_log(path)
            reps.update(done)
            columns = columns or found
        return journal, dict(reps), columns

    def plan(self, args, log_paths, indices: list[int], summary: RunSummary, reports=None) -> list[Task]:
        """The tasks still to do: inputs neither journaled (ok, or failed unless --retry-failed) nor
        complete in the logs; partly measured inputs get only their missing repetitions. ``log_paths``: this
        process's log, or every rank's (a launch resumes from all of them, since any rank may have measured
        an input), or their ``progress``. ``reports(index)``: whether this process counts an input it skips
        or excludes (ranks of one queue each count a round-robin share)."""
        journal, reps_done, columns = log_paths if isinstance(log_paths, tuple) else self.progress(log_paths)
        reports = reports or (lambda index: True)
        tasks = []
        for index in indices:
            record = journal.get(index)
            if record is not None and (record.get("status") == STATUS_OK or not args.retry_failed):
                summary.skipped += reports(index)
                continue
            spec = self.make_input(index, args)
            reason = self.exclude_reason(spec, args)
            if reason is not None:
                if reports(index):
                    if not summary.excluded:
                        print(f"{self.name}: leaving out inputs, e.g. sample {index} "
                              f"({self.describe_input(spec)}): {reason}", file=sys.stderr)
                    summary.excluded += 1
                continue
            key = self.input_key(spec, args, columns)
            remaining = args.num_reps - reps_done.get(key, 0) if key is not None else args.num_reps
            if remaining <= 0:
                summary.skipped += reports(index)
                continue
            tasks.append(Task(index, spec, remaining, key))
        return tasks

    def rank_indices(self, args, info: distributed.RankInfo, shared: bool = False) -> list[int]:
        """This rank's sample indices. Alone, or ranks drawing from one queue (``shared``): all of them.
        Otherwise every rank batches the whole range as one process would (progress not looked at, so the
        deal stays the same when ranks resume) and takes its share of the batches dealt by
        ``work_estimate``; excluded inputs go round robin, so the ranks' counts add up to one process's."""
        first, count = args.first_sample, self.total_inputs(args)
        if info.world_size <= 1 or shared:
            return list(range(first, first + count))
        tasks, excluded = [], []
        for index in range(first, first + count):
            spec = self.make_input(index, args)
            if self.exclude_reason(spec, args) is not None:
                excluded.append(index)
            else:
                tasks.append(Task(index, spec, args.num_reps))
        groups = [([t.index for t in batch], self.work_estimate(batch, args))
                  for batch in self.make_batches(tasks, args)]
        mine = distributed.deal_by_work(groups, info.world_size)[info.rank]
        return sorted(mine + [i for i in excluded if i % info.world_size == info.rank])

    @staticmethod
    def _check_in(args, info: distributed.RankInfo) -> "distributed.InputClaims | None":
        """This launch's shared queue, checked in; None (a static deal) when there is no launch id or the
        claims folder cannot be used."""
        claims = distributed.InputClaims.for_launch(args.output, info)
        if claims is None:
            return None
        try:
            shared = claims.check_in(args.shard_wait_seconds)
        except OSError as exc:
            print(f"rank {info.rank}: cannot use the claims folder {claims.base} ({exc}): measuring this "
                  "rank's static share", file=sys.stderr)
            return None
        if shared:
            print(f"rank {info.rank}: all {info.world_size} ranks draw inputs from one queue "
                  f"({claims.directory})", file=sys.stderr)
        else:
            print(f"rank {info.rank}: not all {info.world_size} ranks seen in {claims.directory} after "
                  f"{args.shard_wait_seconds:g}s (no shared filesystem?): measuring this rank's static "
                  "share", file=sys.stderr)
        return claims

    def make_batches(self, tasks: list[Task], args) -> list[Batch]:
        """Tasks grouped into batches of at most ``--batch-size`` with the same ``batch_key`` and the same
        repetition count, within ``batch_weight_limit``; batches come in the order of their first task."""
        open_batches: dict = {}
        batches: list[Batch] = []
        limit = self.batch_weight_limit(args)
        for task in tasks:
            group = (repr(self.batch_key(task.spec, args)), task.reps)
            weight = self.batch_weight(task.spec, args)
            current = open_batches.get(group)
            if current is not None and (len(current[0]) >= args.batch_size or current[1] + weight > limit):
                current = None
            if current is None:
                current = [[], 0.0]
                open_batches[group] = current
                batches.append(current[0])
            current[0].append(task)
            current[1] += weight
        return batches

    # --- devices ----------------------------------------------------------------------------------------

    def worker_devices(self, args, info: distributed.RankInfo) -> list[str]:
        """One entry per worker: "cpu" or "cuda:<physical index>"."""
        if args.device == "cpu":
            if args.num_workers < 1:
                raise ValueError("--num-workers must be >= 1")
            return ["cpu"] * args.num_workers
        if args.devices:
            gpus = distributed.parse_devices(args.devices)
        elif args.num_gpus is not None:
            if args.num_gpus < 1:
                raise ValueError("--num-gpus must be >= 1")
            gpus = list(range(args.num_gpus))
        elif args.device not in ("cuda", "gpu"):
            try:
                gpus = [int(str(args.device).replace("cuda:", ""))]
            except ValueError:
                raise ValueError(f"--device {args.device!r}: expected cuda, cpu or a GPU index") from None
        else:
            gpus = [info.local_rank if info.under_launcher else 0]
        if args.workers_per_gpu < 1:
            raise ValueError("--workers-per-gpu must be >= 1")
        return [f"cuda:{g}" for g in gpus for _ in range(args.workers_per_gpu)]

    @staticmethod
    def shares_devices(args) -> bool:
        """Whether workers on one device take turns (device_lock) and get their own slice of the cores."""
        return bool(getattr(args, "exclusive_timing", False) or getattr(args, "workers_per_gpu", 1) > 1)

    # --- the run -----------------------------------------------------------------------------------------

    def run(self, argv=None) -> int:
        """Parse the command line, run, and return a process exit code."""
        args = self.parse_args(argv)
        try:
            summary = self.execute(args, list(sys.argv[1:] if argv is None else argv))
        except (WorkerStartError, OSError, ValueError) as exc:  # bad input (a shapes file, a flag): one line
            return command_line.fail(self.command, exc, 2)
        failed = sum(summary.failed.values())
        print(
            f"{self.name}: {summary.ok} inputs done, {failed} failed {dict(summary.failed)}, "
            f"{summary.skipped} skipped (already done), {summary.not_started} not started, "
            f"{summary.interrupted} interrupted, {summary.excluded} excluded, "
            f"{summary.seconds / 60:.2f} min -> {summary.log_path}",
            file=sys.stderr,
        )
        return 0

    def execute(self, args, argv: list[str]) -> RunSummary:
        info = distributed.rank_info()
        log_path = distributed.rank_output_path(args.output, info)
        directory = os.path.dirname(os.path.abspath(log_path))
        os.makedirs(directory, exist_ok=True)
        summary = RunSummary(log_path=log_path)
        start = time.monotonic()
        # what is done is read before the ranks check in, so no rank counts what another measures meanwhile
        progress = self.progress(distributed.all_rank_output_paths(args.output, info.world_size)
                                 if info.under_launcher and info.world_size > 1 else log_path)
        claims = self._check_in(args, info) if args.shard == "queue" else None
        indices = self.rank_indices(args, info, shared=claims is not None and claims.shared)
        reports = claims.reports if claims is not None else None
        tasks = self.plan(args, progress, indices, summary, reports)
        summary.planned = sum(1 for t in tasks if reports is None or reports(t.index))
        devices = self.worker_devices(args, info)[: max(1, len(tasks))]
        if tasks:
            _Pool(self, args, argv, log_path, devices, summary, start, claims).run(self.make_batches(tasks, args))
        summary.seconds = time.monotonic() - start
        distributed.write_done_marker(log_path, summary.as_dict())
        self.finish(args, log_path, summary)
        if args.merge_to and info.rank == 0:
            paths = distributed.all_rank_output_paths(args.output, info.world_size)
            missing = distributed.wait_for_markers(paths, args.merge_wait_seconds)
            if missing:
                print(f"warning: ranks not finished after {args.merge_wait_seconds}s, merging without: "
                      f"{missing}", file=sys.stderr)
            elif claims is not None:
                claims.remove()  # every rank has finished: nothing claims any more
            distributed.merge_logs(args.merge_to, [p for p in paths if p not in missing])
        return summary

    # --- identification of the class in a worker --------------------------------------------------------

    def runner_reference(self) -> str:
        """``module:QualName`` (or ``/path/file.py:QualName``) that a worker imports to rebuild this runner."""
        cls = type(self)
        module = sys.modules.get(cls.__module__)
        name = cls.__module__
        if name == "__main__":
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.name:
                name = spec.name
            else:
                return f"{os.path.abspath(module.__file__)}:{cls.__qualname__}"
        return f"{name}:{cls.__qualname__}"


# --- parent side: the worker pool ----------------------------------------------------------------------


class _Worker:
    """One worker process and its two pipes (JSON lines both ways; stdout/stderr go to a file)."""

    def __init__(self, slot: int, device: str, log_dir: str) -> None:
        self.slot = slot
        self.device = device
        self.log_file = os.path.join(log_dir, f"worker{slot}.log")
        self.proc: subprocess.Popen | None = None
        self.rfd = -1
        self.wfd = -1
        self.buffer = b""
        self.state = "dead"  # starting | idle | busy | dead
        self.batch: Batch | None = None
        self.deadline = 0.0
        self.task_started = 0.0
        self.failed_starts = 0
        self.lock_path: str | None = None  # device_lock file shared with the other workers of the device
        self.cores: list[int] | None = None  # CPU affinity of the worker (and the compilers it starts)

    def start(self, runner: BenchmarkRunner, args, argv: list[str], log_path: str) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [p for p in sys.path if p and os.path.isdir(p)] + [env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        if self.device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = distributed.visible_device_id(int(self.device.split(":")[1]))
        env.update({k: str(v) for k, v in runner.worker_env(args, self.device).items()})
        env["AH_DATAGEN_LOG_PATH"] = log_path
        if self.lock_path:
            env[ENV_DEVICE_LOCK] = self.lock_path
        if self.cores:
            env[ENV_CPU_CORES] = ",".join(str(c) for c in self.cores)  # the worker pins itself first thing
        cmd = [sys.executable, "-m", "torchgen_ah.datagen._runner_worker",
               str(to_child_r), str(from_child_w), runner.runner_reference()]
        with open(self.log_file, "ab") as out:
            out.write(f"\n=== worker {self.slot} on {self.device} starting at {time.ctime()}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                pass_fds=(to_child_r, from_child_w), start_new_session=True,
            )
        os.close(to_child_r)
        os.close(from_child_w)
        self.rfd, self.wfd = from_child_r, to_child_w
        self.buffer = b""
        self.state = "starting"
        self.deadline = time.monotonic() + args.worker_start_timeout
        self.send({"cmd": "init", "argv": argv, "device": self.device, "log_path": log_path})

    def send(self, message: dict) -> bool:
        data = (json.dumps(message) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.wfd, data):]
            return True
        except OSError:
            return False

    def read(self) -> list[dict] | None:
        """Messages available now; None at end of file (the worker died)."""
        try:
            chunk = os.read(self.rfd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def kill(self) -> None:
        """Kill the worker's whole process group (it may have compile subprocesses) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self._close()

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.send({"cmd": "stop"})
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not delivered
                pass
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.rfd = self.wfd = -1
        self.state = "dead"

    def log_tail(self) -> str:
        try:
            with open(self.log_file, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - _TAIL_BYTES))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


class _Pool:
    """Deals tasks to workers, enforces timeouts and the time budget, journals every outcome."""

    MAX_FAILED_STARTS = 3

    def __init__(self, runner, args, argv, log_path, devices, summary: RunSummary, start: float,
                 claims: "distributed.InputClaims | None" = None) -> None:
        self.runner = runner
        self.claims = claims
        self.args = args
        self.argv = argv
        self.log_path = log_path
        self.summary = summary
        self.start_time = start
        self.log_dir = BenchmarkRunner.worker_log_dir(log_path)
        os.makedirs(self.log_dir, exist_ok=True)
        self.workers = [_Worker(i, d, self.log_dir) for i, d in enumerate(devices)]
        if BenchmarkRunner.shares_devices(args):
            info = distributed.rank_info()
            for worker, cores in zip(self.workers, worker_core_slices(len(self.workers), info)):
                worker.lock_path = os.path.join(self.log_dir, f"device-{worker.device.replace(':', '')}.lock")
                worker.cores = cores
        self.journal = open(BenchmarkRunner.journal_path(log_path), "a", encoding="utf-8")
        self.stop_requested = False
        self.bar = None

    # budget
    def _soft_deadline(self) -> float:
        if self.args.max_minutes is None:
            return float("inf")
        return self.start_time + 60.0 * self.args.max_minutes

    def _record(self, task: Task, status: str, seconds: float, device: str, error: str = "", info=None,
                batch: int = 1):
        """Journal one input's outcome (``seconds`` is its batch's wall time, ``batch`` the batch size)."""
        record = {
            "index": task.index, "status": status, "reps": task.reps, "seconds": round(seconds, 3),
            "batch": batch, "device": device, "input": task.spec, "key": task.key,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        if error:
            record["error"] = error[-_TAIL_BYTES:]
        if info:
            record["info"] = info
        self.journal.write(json.dumps(record) + "\n")
        self.journal.flush()
        if status == STATUS_OK:
            self.summary.ok += 1
        else:
            self.summary.failed[status] += 1
            self._say(f"[{status}] sample {task.index} ({self.runner.describe_input(task.spec)}) on {device}: "
                      f"{error_headline(error)}")
        if self.bar is not None:
            self.bar.update(1)
            minutes = (time.monotonic() - self.start_time) / 60.0
            done = self.summary.ok + sum(self.summary.failed.values())
            self.bar.set_postfix_str(f"{done / max(minutes, 1e-9):.1f} samples/min, "
                                     f"{sum(self.summary.failed.values())} failed")

    def _say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def _on_signal(self, signum, frame) -> None:
        self.stop_requested = True

    def run(self, batches: list[Batch]) -> None:
        pending = collections.deque(batches)
        self.pending = pending
        if not self.args.no_progress:
            total = sum(len(b) for b in batches)
            self.bar = tqdm(total=total, desc=self.runner.name, unit="input", dynamic_ncols=True)
        old_handlers = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                old_handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                pass
        try:
            for worker in self.workers:
                self._start(worker)
            self._loop(pending)
        finally:
            for worker in self.workers:
                if worker.state == "busy" and worker.batch is not None:
                    self.summary.interrupted += len(worker.batch)
                worker.stop(timeout=5.0 if self.stop_requested else 20.0)
            self.summary.not_started += self._not_started(pending)
            self.journal.close()
            if self.bar is not None:
                self.bar.close()
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)

    def _start(self, worker: _Worker) -> None:
        try:
            worker.start(self.runner, self.args, self.argv, self.log_path)
        except OSError as exc:
            worker.failed_starts += 1
            worker.state = "dead"
            self._say(f"worker {worker.slot} on {worker.device} failed to start: {exc}")

    def _loop(self, pending: collections.deque) -> None:
        soft = self._soft_deadline()
        hard = soft + self.args.stop_grace_seconds
        while True:
            now = time.monotonic()
            if pending and (self.stop_requested or now >= soft):
                count = self._not_started(pending)
                self._say(f"{'stop requested' if self.stop_requested else 'time budget reached'}: "
                          f"{count} inputs not started")
                self.summary.not_started += count
                pending.clear()
            if self.stop_requested or now >= hard:
                return  # in-flight samples are killed by run()'s cleanup and counted as interrupted
            if pending:  # (re)start workers only while there is work for them
                for worker in self.workers:
                    if worker.state == "dead" and worker.failed_starts < self.MAX_FAILED_STARTS:
                        self._start(worker)
            for worker in self.workers:
                if worker.state == "idle" and pending:
                    batch = self._take(pending)
                    if batch:
                        self._dispatch(worker, batch)
            if not any(w.state == "busy" for w in self.workers):
                if not pending:
                    return
                if not any(w.state == "starting" for w in self.workers):
                    worst = self.workers[0]
                    raise WorkerStartError(
                        f"no worker could be set up ({self.MAX_FAILED_STARTS} attempts each); "
                        f"last lines of {worst.log_file}:\n{worst.log_tail()}"
                    )
            busy = [w for w in self.workers if w.state in ("starting", "busy")]
            wait = max(0.0, min(min(w.deadline for w in busy), hard) - time.monotonic())
            try:
                readable, _, _ = select.select([w.rfd for w in busy], [], [], min(wait, 5.0))
            except InterruptedError:
                readable = []
            for worker in busy:
                if worker.rfd in readable:
                    self._handle_output(worker)
            now = time.monotonic()
            for worker in self.workers:
                if worker.state in ("starting", "busy") and now >= worker.deadline:
                    self._handle_deadline(worker)

    def _take(self, pending: collections.deque) -> Batch | None:
        """The next batch, less the inputs other ranks of a shared queue claimed (they count as progress)."""
        while pending:
            batch = pending.popleft()
            if self.claims is None:
                return batch
            mine = [t for t in batch if self.claims.claim(t.index)]
            if self.bar is not None and len(mine) < len(batch):
                self.bar.update(len(batch) - len(mine))
            if mine:
                return mine
        return None

    def _not_started(self, pending: collections.deque) -> int:
        """Inputs left in the queue at a stop that this rank reports as not started: all of them alone;
        with claims, those this rank holds (e.g. waiting for a retry) or can still claim among the ones it
        reports, so that no other rank measures or counts them too."""
        if self.claims is None:
            return sum(len(b) for b in pending)
        return sum(1 for b in pending for t in b if self.claims.holds(t.index)
                   or (self.claims.reports(t.index) and self.claims.claim(t.index)))

    def _time_limit(self, worker: _Worker, batch: Batch) -> float:
        """Seconds a batch may take: --timeout-per-sample per input, times the workers it takes turns with
        (a worker may wait that long for the device)."""
        sharing = sum(1 for w in self.workers if w.device == worker.device) if worker.lock_path else 1
        return self.args.timeout_per_sample * len(batch) * sharing

    def _dispatch(self, worker: _Worker, batch: Batch) -> None:
        worker.batch = batch
        worker.state = "busy"
        worker.task_started = time.monotonic()
        worker.deadline = worker.task_started + self._time_limit(worker, batch)
        items = [{"index": t.index, "spec": t.spec} for t in batch]
        if not worker.send({"cmd": "run", "items": items, "reps": batch[0].reps}):
            self._handle_death(worker)

    def _failed(self, worker: _Worker, batch: Batch, status: str, error: str) -> None:
        """A failed batch of several inputs goes back to the front of the queue as single inputs (only
        the bad one will fail again); a single input's failure is journaled."""
        seconds = time.monotonic() - worker.task_started
        if len(batch) > 1:
            self._say(f"[{status}] batch of {len(batch)} inputs ({', '.join(str(t.index) for t in batch)}) "
                      f"on {worker.device} after {seconds:.0f}s: {error_headline(error)}; retrying them one by one")
            for task in reversed(batch):
                task.solo = True
                self.pending.appendleft([task])
            return
        self._record(batch[0], status, seconds, worker.device, error)

    def _handle_output(self, worker: _Worker) -> None:
        messages = worker.read()
        if messages is None:
            self._handle_death(worker)
            return
        for message in messages:
            kind = message.get("msg")
            if kind == "ready" and worker.state == "starting":
                worker.state = "idle"
                worker.failed_starts = 0
            elif kind == "setup_failed":
                worker.failed_starts += 1
                self._say(f"worker {worker.slot} on {worker.device} setup failed: "
                          f"{error_headline(message.get('error', ''))}")
                worker.kill()
            elif kind == "result" and worker.state == "busy" and worker.batch is not None:
                batch = worker.batch
                if message.get("indices") != [t.index for t in batch]:
                    continue
                status = message.get("status", "error")
                worker.batch = None
                worker.state = "idle"
                if status != STATUS_OK:
                    self._failed(worker, batch, status, message.get("error", ""))
                    continue
                seconds = time.monotonic() - worker.task_started
                infos = message.get("info") or [None] * len(batch)
                for task, info in zip(batch, infos):
                    self._record(task, STATUS_OK, seconds, worker.device, "", info, batch=len(batch))

    def _handle_death(self, worker: _Worker) -> None:
        tail = worker.log_tail()
        code = worker.proc.poll() if worker.proc is not None else None
        was = worker.state
        batch = worker.batch
        worker.kill()
        worker.batch = None
        if was == "busy" and batch:
            self._failed(worker, batch, "crash",
                         f"worker process died (exit code {code}) while measuring this input; "
                         f"log tail:\n{tail}")
        else:
            worker.failed_starts += 1
            self._say(f"worker {worker.slot} on {worker.device} died during setup (exit code {code}); "
                      f"see {worker.log_file}")

    def _handle_deadline(self, worker: _Worker) -> None:
        if worker.state == "starting":
            worker.failed_starts += 1
            self._say(f"worker {worker.slot} on {worker.device} not ready after "
                      f"{self.args.worker_start_timeout}s; restarting")
            worker.kill()
        else:
            batch = worker.batch
            worker.kill()
            worker.batch = None
            if batch:
                limit = self._time_limit(worker, batch)
                self._failed(worker, batch, "timeout", f"no result after {limit}s; worker killed")


# Lines that end many torch tracebacks and say nothing about the error itself.
_BOILERPLATE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context", "Found from", "File ",
                "^", "~", "target:", "args[", "))", ")")


def error_headline(error: str, limit: int = 300) -> str:
    """The line of a traceback that names the error (``RuntimeError: ...``), for one-line messages. Torch's
    compile errors end with advice lines ("Set TORCHDYNAMO_VERBOSE=1 ..."), so the last line alone hides
    what failed; this takes the last ``SomethingError: message`` line, else the last informative line."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if ":" in line and head.replace(".", "").replace("_", "").isalnum() and head.endswith(
                ("Error", "Exception", "Exit", "Interrupt", "Timeout")):
            return line[:limit]
    for line in reversed(lines):
        if not line.startswith(_BOILERPLATE):
            return line[:limit]
    return lines[-1][:limit] if lines else ""


def worker_core_slices(workers: int, info: distributed.RankInfo) -> list[list[int] | None]:
    """The core slices of this process's ``workers``: under torchrun the ranks of a host split the host's
    cores between all their workers, each rank taking its block by ``LOCAL_RANK``."""
    slices = core_slices(workers * info.local_world_size)
    return slices[info.local_rank * workers:(info.local_rank + 1) * workers]


def core_slices(workers: int) -> list[list[int] | None]:
    """This process's usable cores split into ``workers`` contiguous slices (None each where the platform
    has no CPU affinity or there are fewer cores than workers)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return [None] * workers
    if len(cores) < workers:
        return [None] * workers
    size = len(cores) // workers
    return [cores[i * size:(i + 1) * size] for i in range(workers)]


def format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-_TAIL_BYTES:]


def commit_staged_rows(stage_dir: str, log_path: str) -> int:
    """Append the rows of every log in ``stage_dir`` (written by one successful request) to ``log_path``
    with the log format's locked append (which checks the metadata); returns the number of rows."""
    from ah_plugin.collect.log_format import append_rows, parse_metadata

    total = 0
    for name in sorted(os.listdir(stage_dir)):
        path = os.path.join(stage_dir, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if len(lines) < 2:
            continue
        metadata = parse_metadata(lines[0], path)
        rows = [line for line in lines[2:] if line.strip()]
        append_rows(log_path, metadata, rows, columns=lines[1].split(","))
        total += len(rows)
    return total
