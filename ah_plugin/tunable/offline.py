"""Offline tuning: rebuild each recorded shape, compile it with max-autotune and the cache tuning on.

`tune_gemm_in_file(untuned.csv)` tunes in this process. `mgpu_tune_gemm_in_file(pattern, num_gpus)`
gathers and deduplicates the untuned files matching `pattern`, deals the shapes round-robin to one
worker process per GPU (on a machine without GPUs, N CPU processes stand in), gathers every worker's
results into `<results>_full0.csv` and copies it to `_full1`, ... per GPU. Under torchrun (RANK and
WORLD_SIZE set) each rank tunes its shard on device LOCAL_RANK and the ranks gather over
torch.distributed instead.

The numerical check (`set_numerical_check_tolerances`): after each compile the output is compared with
eager aten's; a winner that differs beyond atol/rtol is excluded and the shape is tuned again without
it (aten is the reference and is never excluded).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

from ..report import command_line
from . import params as P
from . import results_file as F
from . import settings as S
from .store import store, verbose


def _progress(iterable, **kwargs):
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are a nicety
        return iterable
    return tqdm(iterable, **kwargs)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _dtypes(text: str):
    import torch

    names = text.split("x") if "x" in text and not hasattr(torch, text) else [text, text]
    return getattr(torch, names[0]), getattr(torch, names[-1])


def _strides(letter: str, ld: str, rows: int, cols: int) -> tuple[int, int]:
    if letter == "N":
        return int(ld), 1
    if letter == "T":
        return 1, int(ld)
    s0, s1 = ld.split("x")
    return int(s0), int(s1)


def _random(shape, stride, dtype, device):
    import torch

    out = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    if dtype.is_floating_point:
        out.copy_(torch.randn(shape, device=device).to(dtype))
    else:
        out.copy_(torch.randint(-4, 4, shape, device=device).to(dtype))
    return out


def _bias(code: str | None, m: int, n: int, batch: int | None, dtype, device):
    """A random bias with the layout `code` names (params.bias_code): broadcast dims are left out or
    kept at size 1 (a row vector is the 1-D `[N]` of nn.Linear), the others get the recorded strides,
    so Inductor sees the same expanded strides as in the autotuning that was recorded."""
    import torch

    if code is None:
        raise ValueError("no bias layout in the params")
    batch_stride, s0, s1 = P.bias_strides(code)
    dims = [(m, s0), (n, s1)]
    if batch is not None:
        dims.insert(0, (batch, batch_stride or 0))
    sizes = [size if stride else 1 for size, stride in dims]
    strides = [stride if stride else 1 for _, stride in dims]
    while sizes and sizes[0] == 1 and dims[len(dims) - len(sizes)][1] == 0:
        sizes, strides = sizes[1:], strides[1:]  # leading broadcast dims: left out, as in a [N] bias
    storage = 1 + sum((size - 1) * stride for size, stride in zip(sizes, strides))
    flat = torch.randn(storage, device=device).to(dtype)
    return flat.as_strided(sizes, strides)


def rebuild(op: str, key: P.GemmParams, device: str):
    """(callable, inputs, eager reference fn) reproducing the GEMM the key describes."""
    import torch

    if key.wildcards:
        raise ValueError(f"{key.encode()}: wildcard shapes cannot be rebuilt")
    a_dtype, b_dtype = _dtypes(key.dtype)
    m, n, k = key.m, key.n, key.k
    sa = _strides(key.layout[0], key.lda, m, k)
    sb = _strides(key.layout[1], key.ldb, k, n)
    if op == "packed_linear":
        w = _random((k, n), sb, b_dtype, "cpu")
        x = _random((m, k), sa, a_dtype, "cpu")

        class Linear(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(w, requires_grad=False)

            def forward(self, inp):
                return inp @ self.w

        module = Linear().eval()
        return module, (x,), lambda inp: inp @ w
    if op in ("bmm", "baddbmm"):
        b = key.b or 1
        a = torch.stack([_random((m, k), sa, a_dtype, device) for _ in range(b)])
        bb = torch.stack([_random((k, n), sb, b_dtype, device) for _ in range(b)])
        if op == "bmm":
            return torch.bmm, (a, bb), torch.bmm
        bias = _bias(key.bias, m, n, b, a_dtype, device)
        return torch.baddbmm, (bias, a, bb), torch.baddbmm
    a = _random((m, k), sa, a_dtype, device)
    b = _random((k, n), sb, b_dtype, device)
    if op == "addmm":
        bias = _bias(key.bias, m, n, None, a_dtype, device)
        return torch.addmm, (bias, a, b), torch.addmm
    if op == "int_mm":
        return torch._int_mm, (a, b), torch._int_mm
    return torch.mm, (a, b), torch.mm


def _compile_once(fn, inputs):
    import torch

    from ah_plugin.inductor import compile_tools

    torch.compiler.reset()
    with compile_tools.options(fx_graph_cache=False, autotune_local_cache=False, freezing=True), torch.no_grad():
        compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        return compiled(*inputs)


def _close(out, ref, atol: float, rtol: float) -> bool:
    import torch

    return bool(torch.allclose(out.float(), ref.float(), atol=atol, rtol=rtol, equal_nan=True))


def tune_one(op: str, params_text: str, device: str) -> str | None:
    """Tune one shape; returns the recorded solution (None when nothing could be recorded)."""
    import torch

    db = store()
    key = P.parse_for(op, params_text)
    fn, inputs, reference = rebuild(op, key, device)
    check, atol, rtol = S.numerical_check()
    with torch.no_grad():
        expected = reference(*inputs) if check else None
    entry_key = (op, key.encode())
    for _attempt in range(64):
        db.forget(entry_key)
        out = _compile_once(fn, inputs)
        entry = db.entries.get(entry_key)
        if entry is None:
            F.warn(f"{op},{params_text}: compiling the rebuilt shape recorded no result (was it autotuned?)")
            return None
        if not check or entry.solution.startswith("extern_") or _close(out, expected, atol, rtol):
            return entry.solution
        db.stats.rejected_candidates += 1
        db.excluded.setdefault(entry_key, set()).add(entry.solution)
        verbose(1, f"{op},{params_text}: {entry.solution} differs from aten beyond atol={atol} rtol={rtol}; retuning without it")
    db.forget(entry_key)
    return None


def _device_for(index: int) -> str:
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(index % torch.cuda.device_count())
        return "cuda"
    return "cpu"


def _cache_on() -> None:
    """The cache on and first among the plugin's policies: what ``ah_plugin.tunable.enable(True)`` does, here
    without importing the package's front, which imports this module."""
    from ..inductor import adapter
    from ..policy import registry
    from .policy import POLICY

    S.api.enabled = True
    if POLICY not in registry.registered_policies():
        adapter.install()
        registry.register_policy(POLICY, registry.POSITION_CACHE)


def tune_gemm_in_file(filename: str, device_index: int | None = None, position: int = 0) -> int:
    """Tune every shape of an untuned file (`op,params` lines) not yet in the results; write them."""
    _cache_on()
    S.api.tuning = True
    if os.environ.get(S.TUNING, "").strip().lower() in ("0", "false", "no", "off"):
        F.warn(f"{S.TUNING} is off in the environment; offline tuning turns it on for this process")
        os.environ[S.TUNING] = "1"
    device = _device_for(S.device_ordinal() if device_index is None else device_index)
    db = store()
    db.ensure_loaded()
    db.materialize()  # every row in `entries`: the shapes already tuned are skipped
    db.exact_only = True  # a wildcard entry must not stand in for the shape being tuned
    todo = [(op, p) for op, p in F.read_untuned(filename) if (op, p) not in db.entries]
    tuned = 0
    bar = _progress(todo, desc=f"tuning {os.path.basename(filename)}", unit="shape", position=position)
    for op, params_text in bar:
        try:
            if tune_one(op, params_text, device) is not None:
                tuned += 1
        except Exception as error:  # one bad shape must not lose the others
            F.warn(f"{filename}: {op},{params_text}: tuning failed: {error!r}")
    if tuned:
        db.write()
    return tuned


# ----------------------------------------------------------------------------- many GPUs


def gather_untuned(pattern: str) -> list[tuple[str, str]]:
    keys: dict[tuple[str, str], None] = {}
    for path in sorted(glob.glob(pattern)):
        for key in F.read_untuned(path):
            keys[key] = None
    return list(keys)


def full_filename(raw: str, index: int) -> str:
    """`results%d.csv` -> `results_full{index}.csv` (TunableOp's gathered-file name)."""
    raw = S.insert_ordinal_placeholder(raw)
    return raw.replace("%d", f"_full{index}")


def _gather(results_paths: list[str], num_copies: int) -> str:
    validators = F.current_validators()
    merged: dict = {}
    for path in results_paths:
        merged = F.merge(merged, F.read_results(path, validators).entries)
    raw = S.raw_filename()
    first = full_filename(raw, 0)
    if os.path.exists(first):
        os.unlink(first)  # a fresh gather, not a merge with an older one
    F.write_results(first, validators, merged)
    for index in range(1, num_copies):
        shutil.copyfile(first, full_filename(raw, index))
    return first


def _launcher_number(name: str, default: int, minimum: int) -> int:
    """torchrun's RANK / WORLD_SIZE / LOCAL_RANK as an integer; ValueError naming the variable otherwise."""
    from ah_plugin.config.env_values import ascii_int

    text = os.environ.get(name, "")
    value = ascii_int(text) if text else default
    if value is None or value < minimum:
        raise ValueError(f"{name}={text!r} is not an integer >= {minimum} (torchrun sets it)")
    return value


def mgpu_tune_gemm_in_file(filename_pattern: str, num_gpus: int) -> str:
    if _launcher_number("WORLD_SIZE", 1, 1) > 1 and "RANK" in os.environ:
        return _torchrun_tune(filename_pattern)
    keys = gather_untuned(filename_pattern)
    raw = S.insert_ordinal_placeholder(S.raw_filename())
    num_gpus = max(1, int(num_gpus))
    workdir = tempfile.mkdtemp(prefix="ah_tunable_shards.")
    procs, results_paths = [], []
    for index in range(num_gpus):
        shard = keys[index::num_gpus]
        results_path = S.with_ordinal(raw, index)
        results_paths.append(results_path)
        if not shard:
            continue
        shard_path = os.path.join(workdir, f"untuned{index}.csv")
        F.append_untuned(shard_path, shard)
        env = dict(os.environ, **{S.ENABLED: "1", S.TUNING: "1", S.RECORD_UNTUNED: "0", S.FILENAME: results_path})
        # the workers share the host's cores: each compiles with its share unless the user chose a count
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, _usable_cores() // num_gpus)))
        command = [sys.executable, "-m", "ah_plugin.tunable.offline", "worker", shard_path, str(index)]
        procs.append((index, subprocess.Popen(command, env=env)))
    failed = []
    for index, proc in _progress(procs, desc=f"{len(keys)} shapes on {num_gpus} workers", unit="worker"):
        if proc.wait() != 0:
            failed.append(index)
    if failed:
        F.warn(f"offline tuning workers {failed} failed; their shapes stay untuned")
    shutil.rmtree(workdir, ignore_errors=True)
    return _gather([p for p in results_paths if os.path.exists(p)], num_gpus)


def _torchrun_tune(pattern: str) -> str:
    """One shard per rank (device LOCAL_RANK); rows gathered over torch.distributed."""
    import torch.distributed as dist

    rank, world = _launcher_number("RANK", 0, 0), _launcher_number("WORLD_SIZE", 1, 1)
    local = _launcher_number("LOCAL_RANK", 0, 0)
    keys = gather_untuned(pattern)[rank::world]
    raw = S.insert_ordinal_placeholder(S.raw_filename())
    S.api.filename = raw.replace("%d", f"_rank{rank}")
    os.environ.pop(S.FILENAME, None)
    fd, shard_path = tempfile.mkstemp(prefix=f"ah_tunable_rank{rank}.", suffix=".csv")
    os.close(fd)
    F.append_untuned(shard_path, keys)
    tune_gemm_in_file(shard_path, device_index=local, position=local)
    os.unlink(shard_path)
    if not dist.is_initialized():
        dist.init_process_group(backend="gloo")
    mine = [e.row() for e in store().entries.values()]
    gathered: list = [None] * world
    dist.all_gather_object(gathered, mine)
    merged: dict = {}
    margin = F.aten_margin_setting()
    for rows in gathered:  # one rank's store: one row per key
        rank = {(op, params_text): F.Entry(op, params_text, solution, float(time_text))
                for op, params_text, solution, time_text in rows}
        merged = F.merge(merged, rank, margin)
    S.api.filename = raw
    # every local rank writes its own copy: each host ends with _full0 .. _full{local_world - 1}
    F.write_results(full_filename(raw, local), F.current_validators(), merged)
    dist.barrier()
    return full_filename(raw, 0)


def _main(argv: list[str] | None = None) -> int:
    prog = "python -m ah_plugin.tunable.offline"
    parser = command_line.parser(prog, "Tune the shapes a results cache recorded untuned (AH_TUNABLE_RECORD_UNTUNED).")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="tune one shard (used by mgpu_tune_gemm_in_file)")
    worker.add_argument("untuned", help="the shard's untuned file")
    worker.add_argument("index", type=int, help="the GPU (and shard) index")
    one = sub.add_parser("tune", help="tune an untuned file in this process")
    one.add_argument("untuned", help="an untuned file (ah_tunable_untuned0.csv)")
    many = sub.add_parser("mgpu", help="tune untuned files matching a pattern on N GPUs (or under torchrun)")
    many.add_argument("pattern", help="a glob of untuned files, quoted ('ah_tunable_untuned*.csv')")
    many.add_argument("num_gpus", type=int, help="GPUs (one process each)")
    args = parser.parse_args(argv)
    try:
        if args.command in ("worker", "tune") and not os.path.isfile(args.untuned):
            raise FileNotFoundError(2, "No such file (an untuned file: op,params lines)", args.untuned)
        if args.command == "worker":
            tune_gemm_in_file(args.untuned, device_index=args.index, position=args.index)
        elif args.command == "tune":
            print(tune_gemm_in_file(args.untuned))
        else:
            print(mgpu_tune_gemm_in_file(args.pattern, args.num_gpus))
    except (OSError, ValueError) as exc:
        return command_line.fail("offline", exc, 2)
    return 0


if __name__ == "__main__":
    warnings.simplefilter("default")
    sys.exit(_main())
