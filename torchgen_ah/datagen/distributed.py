"""Where a data-generation process sits among GPUs and hosts, and how their outputs come together.

* One host, several GPUs: the runner starts one worker process per GPU (``--num-gpus N`` or
  ``--devices 0,2,5``); the workers share the process's log through locked appends.
* Several hosts (or one process per GPU) under ``torchrun``: ranks that share the output folder draw
  inputs from one queue (``InputClaims``); others take a static share (every rank batches the whole
  sample range as one process would and deals the batches by estimated work, ``deal_by_work``).
  ``LOCAL_RANK`` picks the GPU, and each rank writes its
  own file (``out.txt`` -> ``out.rank3.txt``). ``merge_rank_logs`` joins them with the data layer's merge,
  which refuses logs whose metadata disagree.

No torch import here: the parent process of a run never initialises CUDA.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class RankInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    under_launcher: bool = False  # RANK/WORLD_SIZE came from the environment (torchrun and the like)
    local_world_size: int = 1  # processes of this launch on this host (they share its cores)


def _env_int(environ, name: str) -> int | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not an integer") from None


def rank_info(environ=None) -> RankInfo:
    """This process's place in a multi-process launch (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK)."""
    env = os.environ if environ is None else environ
    rank = _env_int(env, "RANK")
    world = _env_int(env, "WORLD_SIZE")
    if rank is None and world is None:
        return RankInfo()
    if rank is None or world is None:
        raise ValueError("RANK and WORLD_SIZE must be set together (as torchrun does)")
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    local = _env_int(env, "LOCAL_RANK")
    local_world = _env_int(env, "LOCAL_WORLD_SIZE")
    return RankInfo(rank, world, rank if local is None else local, True,
                    max(1, local_world if local_world is not None else 1))


def deal_by_work(groups: list[tuple[list[int], float]], world_size: int) -> list[list[int]]:
    """Indices per rank from ``(indices, estimated work)`` groups that must stay together: heaviest group
    first (ties by first index), each to the rank with the least work so far (ties: lowest rank).

    Static sharding cannot rebalance at run time as one host's shared queue does, so a round-robin deal
    of a few hundred inputs whose costs differ tenfold leaves one rank finishing long after the others.
    Deterministic: every rank computes the same deal from the same inputs."""
    loads = [0.0] * world_size
    out: list[list[int]] = [[] for _ in range(world_size)]
    for indices, work in sorted(groups, key=lambda g: (-g[1], min(g[0]) if g[0] else 0)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        loads[rank] += work
        out[rank].extend(indices)
    return [sorted(part) for part in out]


class InputClaims:
    """Which rank measures which input, when the ranks of a launch share a filesystem: a rank claims an
    input by creating ``<dir>/<index>`` exclusively before measuring it, so the ranks draw from one queue
    and a rank that drew slow inputs takes fewer (a static deal cannot rebalance at run time).

    The folder is per launch: ``<output>.claims/<launch id>-r<restart>/g<n>``. The launch id is torchrun's
    ``TORCHELASTIC_RUN_ID``, else ``MASTER_ADDR``/``MASTER_PORT``. A rank checks in by creating
    ``rank<r>.here`` exclusively in the first generation ``g<n>`` where it does not exist yet, so a launch
    that reuses an id (a restart, a requeued job) starts from an empty folder instead of an earlier
    launch's claims; what is done comes from the journals and logs. ``shared`` becomes True only when a
    rank sees all ``world_size`` check-ins. Ranks that do not (hosts without a common filesystem, a rank
    too late) keep their static deal but still claim, so within a launch no input is measured twice."""

    def __init__(self, base: str, info: RankInfo) -> None:
        self.base = base
        self.directory = base
        self.info = info
        self.shared = False
        self._mine: set[int] = set()
        self._warned = False

    @staticmethod
    def launch_id(environ=None) -> str | None:
        env = os.environ if environ is None else environ
        run_id = env.get("TORCHELASTIC_RUN_ID", "").strip()
        if not run_id or run_id == "none":  # plain torchrun without --rdzv-id or --standalone
            addr, port = env.get("MASTER_ADDR", "").strip(), env.get("MASTER_PORT", "").strip()
            run_id = f"{addr}-{port}" if addr and port else ""
        if not run_id:
            return None
        restart = env.get("TORCHELASTIC_RESTART_COUNT", "0").strip() or "0"
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{run_id}-r{restart}")

    @classmethod
    def for_launch(cls, output: str, info: RankInfo, environ=None) -> "InputClaims | None":
        """Claims beside ``output`` for this launch, or None when not launched or the launch has no id."""
        launch = cls.launch_id(environ)
        if info.world_size <= 1 or launch is None:
            return None
        return cls(os.path.join(f"{output}.claims", launch), info)

    def check_in(self, wait_seconds: float) -> bool:
        """Announce this rank in the launch's first fresh generation folder and wait up to
        ``wait_seconds`` for all ranks there; sets and returns ``shared``. Raises OSError when the folder
        cannot be written (the caller falls back to a static deal)."""
        generation = 0
        while True:
            directory = os.path.join(self.base, f"g{generation}")
            os.makedirs(directory, exist_ok=True)
            try:
                os.close(os.open(os.path.join(directory, f"rank{self.info.rank}.here"),
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                generation += 1
        self.directory = directory
        deadline = time.monotonic() + wait_seconds
        expected = {f"rank{r}.here" for r in range(self.info.world_size)}
        while True:
            if expected <= set(os.listdir(directory)):
                self.shared = True
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def claim(self, index: int) -> bool:
        """True if this rank may measure input ``index`` (claimed now, or earlier by this rank). If the
        folder fails (disk full, stale NFS handle), the input goes by the round-robin rule instead, which
        the other ranks apply too when they fail the same way."""
        if index in self._mine:
            return True
        try:
            fd = os.open(os.path.join(self.directory, str(index)), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        except OSError as exc:
            if not self._warned:
                self._warned = True
                print(f"warning: cannot claim inputs in {self.directory} ({exc}); taking inputs round robin",
                      file=sys.stderr)
            if index % self.info.world_size != self.info.rank:
                return False
            self._mine.add(index)
            return True
        try:
            os.write(fd, str(self.info.rank).encode())
        except OSError:
            pass  # the file exists: the claim holds without its content
        finally:
            os.close(fd)
        self._mine.add(index)
        return True

    def holds(self, index: int) -> bool:
        return index in self._mine

    def reports(self, index: int) -> bool:
        """Whether this rank reports an input in its counts (done, skipped, excluded, not started) when no
        rank measured it: in a shared queue round robin, so the ranks' counts add up to one process's; in
        a static deal every input of the rank's share."""
        return not self.shared or index % self.info.world_size == self.info.rank

    def remove(self) -> None:
        """Delete this launch's folder (all ranks have finished)."""
        shutil.rmtree(self.base, ignore_errors=True)


def rank_output_path(path: str, info: RankInfo) -> str:
    """``out.txt`` for a single process; ``out.rank<R>.txt`` when WORLD_SIZE > 1."""
    if info.world_size <= 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{info.rank}{ext or '.txt'}"


def all_rank_output_paths(path: str, world_size: int) -> list[str]:
    return [rank_output_path(path, RankInfo(r, world_size)) for r in range(world_size)]


def default_device(environ=None) -> str:
    """"cuda" when this machine shows an NVIDIA GPU (``/dev/nvidia<N>``) that ``CUDA_VISIBLE_DEVICES``
    does not hide, else "cpu". Without importing torch: the runner's parent never does."""
    env = os.environ if environ is None else environ
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "cpu"
    try:
        names = os.listdir("/dev")
    except OSError:
        return "cpu"
    return "cuda" if any(n.startswith("nvidia") and n[len("nvidia"):].isdigit() for n in names) else "cpu"


def parse_devices(text: str) -> list[int]:
    """``"0,2,5"`` -> [0, 2, 5]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            raise ValueError(f"--devices: {item!r} is not a GPU index (expected e.g. 0,1,3)") from None
    if not out:
        raise ValueError("--devices: no GPU index given")
    return out


def visible_device_id(index: int, environ=None) -> str:
    """The CUDA_VISIBLE_DEVICES value that shows a worker only GPU ``index`` of this process's view.

    When the parent already restricts visibility (``CUDA_VISIBLE_DEVICES=4,5``), index 1 is "5"."""
    env = os.environ if environ is None else environ
    current = env.get("CUDA_VISIBLE_DEVICES")
    if current is None or not current.strip():
        return str(index)
    visible = [v.strip() for v in current.split(",") if v.strip()]
    if index >= len(visible):
        raise ValueError(f"GPU index {index} is not visible (CUDA_VISIBLE_DEVICES={current})")
    return visible[index]


# --- end of run: markers and merge ---------------------------------------------------------------------


def done_marker_path(log_path: str) -> str:
    return f"{log_path}.done.json"


def write_done_marker(log_path: str, summary: dict) -> None:
    """Written by a rank when it has finished (or stopped at its time budget)."""
    tmp = f"{done_marker_path(log_path)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, sort_keys=True)
    os.replace(tmp, done_marker_path(log_path))


def wait_for_markers(log_paths: list[str], timeout_s: float, poll_s: float = 1.0) -> list[str]:
    """Wait until every path's done marker exists; returns the paths still missing at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [p for p in log_paths if not os.path.exists(done_marker_path(p))]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(poll_s)


def merge_logs(out_path: str, in_paths: list[str]) -> None:
    """Merge logs with the data layer (``python -m torchgen_ah.merge_data OUT IN...``), which checks that
    their metadata agree. Raises RuntimeError with the merge's own message on failure."""
    inputs = [p for p in in_paths if os.path.exists(p) and os.path.getsize(p) > 0]
    if not inputs:
        raise RuntimeError(f"nothing to merge into {out_path}: none of {in_paths} holds data")
    proc = subprocess.run(
        [sys.executable, "-m", "torchgen_ah.data.merge", out_path, *inputs],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"merging {len(inputs)} logs into {out_path} failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
