"""Worker process of ``BenchmarkRunner``: rebuilds the runner, sets up once, then measures inputs on request.

Started by the runner as ``python -m torchgen_ah.datagen._runner_worker IN_FD OUT_FD module:Class``. Requests
and replies are JSON lines on the two pipes; stdout/stderr go to the worker's log file. An exception in a
sample is reported as a result and the worker carries on; anything worse (a hang, a crash) is the
parent's to handle by killing this process group.

A request is a batch: ``{"cmd": "run", "items": [{"index", "spec"}, ...], "reps"}``; the reply has the
indices, one status for the whole batch and one info per input (the parent retries a failed batch input
by input). Runners with ``stage_rows`` write a request's rows to a staging file that is appended to the
log only when the request succeeded.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import sys
import time
import traceback

from torchgen_ah.datagen.benchmark_runner import commit_staged_rows


def resolve_runner_class(reference: str):
    """``package.module:Class`` or ``/path/to/file.py:Class`` -> the class."""
    target, _, qualname = reference.rpartition(":")
    if not target or not qualname:
        raise ValueError(f"bad runner reference {reference!r} (expected module:Class)")
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(f"_ah_runner_{abs(hash(target))}", target)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _Channel:
    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.reader = os.fdopen(in_fd, "rb", buffering=0)
        self.out_fd = out_fd
        self.buffer = b""

    def receive(self) -> dict | None:
        while b"\n" not in self.buffer:
            chunk = self.reader.read(1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, message: dict) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        while data:
            data = data[os.write(self.out_fd, data):]


def _tail(exc: BaseException, limit: int = 4000) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-limit:]


def pin_to_assigned_cores() -> None:
    """Workers sharing a device each run on their own slice of the cores (``AH_DATAGEN_CPU_CORES``, set by
    the runner), before torch starts any thread; the compilers they start inherit it."""
    cores = os.environ.get("AH_DATAGEN_CPU_CORES", "").strip()
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cores.split(",")})


def main(argv: list[str]) -> int:
    pin_to_assigned_cores()
    in_fd, out_fd, reference = int(argv[0]), int(argv[1]), argv[2]
    channel = _Channel(in_fd, out_fd)
    init = channel.receive()
    if init is None or init.get("cmd") != "init":
        return 1
    device = init["device"]
    try:
        runner = resolve_runner_class(reference)()
        runner.log_path = init.get("log_path")
        args = runner.parse_args(init["argv"])
        runner.setup_worker(args, device)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        channel.send({"msg": "setup_failed", "error": _tail(exc)})
        return 1
    channel.send({"msg": "ready", "pid": os.getpid()})
    while True:
        request = channel.receive()
        if request is None or request.get("cmd") == "stop":
            return 0
        if request.get("cmd") != "run":
            continue
        channel.send(_run_request(runner, args, device, request))


def _run_request(runner, args, device: str, request: dict) -> dict:
    """Measure one batch of inputs; the reply carries their indices and one status for all of them."""
    items = request["items"]
    indices = [item["index"] for item in items]
    specs = [item["spec"] for item in items]
    started = time.monotonic()
    for index, spec in zip(indices, specs):
        print(f"--- sample {index}: {runner.describe_input(spec)}", flush=True)
    stage_dir = _open_stage(runner)
    try:
        infos = list(runner.run_batch(specs, int(request["reps"]), args, device))
        if len(infos) != len(specs):
            raise RuntimeError(f"run_batch returned {len(infos)} results for {len(specs)} inputs")
        if stage_dir is not None:
            commit_staged_rows(stage_dir, runner.log_path)
        reply = {"msg": "result", "indices": indices, "status": "ok", "info": infos}
    except Exception as exc:  # noqa: BLE001 - one bad input must not end the run
        status = runner.classify_error(exc)
        reply = {"msg": "result", "indices": indices, "status": status, "error": _tail(exc)}
        try:
            runner.after_failure(exc, args, device)
        except Exception as cleanup_exc:  # noqa: BLE001
            print(f"cleanup after failure raised: {cleanup_exc!r}", file=sys.stderr, flush=True)
    finally:
        if stage_dir is not None:
            shutil.rmtree(stage_dir, ignore_errors=True)
    reply["worker_seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.flush()
    sys.stderr.flush()
    return reply


def _open_stage(runner) -> str | None:
    """With ``runner.stage_rows``: a fresh staging folder for this request's rows (``runner.write_path``,
    and the runner's ``log_path_env`` variable, point into it); else rows go straight to the log."""
    if not runner.stage_rows or not runner.log_path:
        runner.write_path = runner.log_path
        return None
    stage_dir = f"{runner.log_path}.workers/stage-{os.getpid()}"
    shutil.rmtree(stage_dir, ignore_errors=True)
    os.makedirs(stage_dir)
    runner.write_path = os.path.join(stage_dir, os.path.basename(runner.log_path))
    if runner.log_path_env:
        os.environ[runner.log_path_env] = runner.write_path
    return stage_dir

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
