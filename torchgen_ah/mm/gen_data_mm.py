"""``python -m torchgen_ah.mm.gen_data_mm``: collect mm autotuning data with the plugin's collector.

Each input (sampled as upstream does, see ``torchgen_ah.datagen.shape_sampler``, or read from ``--shapes``) is
compiled with ``mode="max-autotune-no-cudagraphs"`` ``--num-reps`` times; every compile autotunes afresh and
the plugin's collector appends one row per timed choice to ``-o``. The candidates are default
max-autotune's choices plus ``--search-space-sample`` configs drawn from the plugin's wider space.

What makes it fast without changing what is measured (the choices and Inductor's own benchmarker stay
as they are):

* warm workers: torch, Triton and CUDA start once per GPU, not once per input;
* batches (``--batch-size``, default 8): the inputs of a batch (same dtype and TF32 setting, since TF32 is
  a global flag) are the graph inputs of ONE compiled function returning every product as a tuple, so
  Dynamo and AOT run once per batch, each mm is still lowered through Inductor's ``tuned_mm`` with its own
  autotuning (nothing fuses into or between them), and Inductor precompiles the candidates of all mms
  in parallel. The plugin's collector logs each mm's autotuning as its own input. A failed batch is
  retried input by input by the runner;
* a fresh Inductor/Triton cache folder per batch: timings never come from a cache (FX graph cache and
  autotune results caches off, so every repetition re-benchmarks), while the repetitions of a batch reuse
  its compiled kernels (``force_disable_caches`` is *not* used: it would recompile every kernel per rep);
* Inductor's parallel precompilation, with the host's cores (its CPU affinity) split between its GPU
  workers;
* a compile-only warm-up per batch (``--warmup-mode compile``): the kernels are built and loaded before
  the logged repetitions, without timing anything;
* candidates compiled in the GPU worker's own threads (``--compile-pool in-process``), not in Inductor's
  subprocess pool, so the kernels the warm-up loads are the ones the repetitions run (2.4-3.3x the inputs
  per GPU-minute on the H200, ``benchmarks/compile_pool_ab.py``);
* two workers per GPU (``--workers-per-gpu 2``): one compiles its next batch's warm-up on its half of the
  cores while the other runs its logged repetitions. They take turns on the GPU (``device_lock``): operand
  creation, the repetitions, autotuning's example inputs and output buffers, and running a compiled graph
  hold the device's lock, compiling does not, and the warm-up's benchmarker launches nothing, so no timed
  run shares the GPU (measured on the H200: 1.53x the inputs per GPU-minute of one worker, see
  ``benchmarks/collect_throughput.py --shared-gpu 2`` and ``benchmarks/rep_consistency.py``);
* cost-aware batches: an input estimated to cost more than ``--batch-gpu-ms`` per call runs alone, so
  one huge input does not hold a whole batch past the time budget (``--max-estimated-ms`` optionally
  leaves such inputs out of a budgeted run).

``--dtypes int8`` collects int8 GEMMs instead (``torch._int_mm``, Inductor's ``int_mm`` autotuning, logged as op
``int_mm``; the sampler makes each input one the int8 GEMM takes, see ``shape_sampler``). A run collects
one op: int8 is not mixed with the float dtypes, and runs on CUDA only.

On ``--device cpu`` the same worker runs the CPU path: constant weights under
``torch.no_grad()`` with freezing lower each ``x_i @ w_i`` to ``packed_linear``, which max-autotune
benchmarks (collected as op ``packed_linear``). Use it with small ``--shapes``; it exists to test the pipeline.

``AH_DATAGEN_INJECT_FAULT="m,k,n;..."`` (testing only) makes a batch holding such an input raise after its
first repetition, as a compile error would, to exercise batch fault isolation with real compiles.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from torchgen_ah.datagen import device_lock, distributed
from torchgen_ah.datagen.benchmark_runner import BenchmarkRunner
from torchgen_ah.datagen.device_lock import held_or_nothing
from torchgen_ah.datagen.fresh_caches import fresh_compile_caches
from torchgen_ah.datagen.shape_sampler import (
    DEFAULT_MEMORY_LIMIT_BYTES,
    DTYPES,
    INT8,
    MMInput,
    read_shapes_file,
    sample_mm_input,
)

# Plugin switches (the names are owned by ah_plugin.config.settings; spelled here so the parent needs no torch).
ENV_COLLECT = "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"
ENV_USE = "TORCHINDUCTOR_AUTOHEURISTIC_USE"
ENV_LOG_PATH = "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"
ENV_SEARCH_SPACE = "AH_PLUGIN_SEARCH_SPACE"
ENV_SEARCH_SAMPLE = "AH_PLUGIN_SEARCH_SAMPLE"
ENV_TIMING = "AH_PLUGIN_TIMING"
ENV_INJECT_FAULT = "AH_DATAGEN_INJECT_FAULT"
ENV_PERSISTENT_TMA = "ENABLE_PERSISTENT_TMA_MATMUL"  # Inductor's switch for its persistent TMA mm template

_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": INT8}

# Nominal H100/H200-class dense rates (FLOP/s) and memory bandwidth (B/s) for a rough cost of one call of an
# input: only used to keep expensive inputs out of shared batches and, optionally, out of a budgeted run.
# Rates for the cost estimate (batching, --max-estimated-ms), not for any measurement. fp32 without TF32
# is set well below the H200's nominal 67 TFLOP/s: Triton's candidates take the FMA path there, and a
# batch of such inputs estimated at <= 20 ms per call still outlasted a 5-minute budget on the H200.
_NOMINAL_FLOPS = {"bfloat16": 8e14, "float16": 8e14, "float32_tf32": 4e14, "float32": 1.5e13, INT8: 1.6e15}
_NOMINAL_BYTES_PER_S = 4e12
COMPILE_MODE = "max-autotune-no-cudagraphs"


def mm_tensor_descriptions(inp: MMInput) -> list[dict]:
    """How ``a`` and ``b`` look to Inductor: a (m, k), b (k, n); a transposed operand is the transpose of
    a contiguous (k, m) / (n, k) tensor, as upstream builds it."""
    dtype = f"torch.{inp.dtype}"
    a_stride = [1, inp.m] if inp.transpose_left else [inp.k, 1]
    b_stride = [1, inp.k] if inp.transpose_right else [inp.n, 1]
    return [
        {"size": [inp.m, inp.k], "stride": a_stride, "dtype": dtype},
        {"size": [inp.k, inp.n], "stride": b_stride, "dtype": dtype},
    ]


class BenchmarkRunnerMM(BenchmarkRunner):
    name = "mm"
    command = "python -m torchgen_ah.mm.gen_data_mm"
    description = "Collect mm max-autotune timings (AutoHeuristic log) on random or listed shapes."
    default_batch_size = 8
    stage_rows = True  # a failed batch leaves no rows behind; its inputs are retried one by one
    log_path_env = ENV_LOG_PATH

    def __init__(self) -> None:
        super().__init__()
        self._shapes_cache: tuple[str, list[MMInput]] | None = None
        self._cache_root: str | None = None
        self._lock: device_lock.DeviceLock | None = None

    # --- command line -----------------------------------------------------------------------------------

    def add_arguments(self, parser) -> None:
        parser.add_argument("--shapes", default=None,
                            help="CSV of inputs (header m,k,n[,transpose_left,transpose_right,dtype,allow_tf32]) "
                                 "instead of sampling; missing columns expand to all layouts/dtypes")
        parser.add_argument("--dtypes", default="bf16,fp16,fp32",
                            help="dtypes to sample (bf16, fp16, fp32; fp32 is split between TF32 on and off); "
                                 "or int8 alone: int8 GEMMs (torch._int_mm, logged as op int_mm; CUDA only)")
        parser.add_argument("--timing", choices=("replay", "per_call"), default="replay",
                            help="how each candidate is timed on a GPU: by CUDA-graph replay, as it runs in a "
                                 "compiled model (the log says so in its metadata), or by Inductor's per-call "
                                 "events, as upstream's data were (default: %(default)s)")
        parser.add_argument("--search-space", choices=("wide", "default"), default="wide",
                            help="plugin search space: 'wide' adds sampled configs beyond default's")
        parser.add_argument("--persistent-tma", action="store_true",
                            help="also time Inductor's persistent TMA mm template (Hopper and newer; off in "
                                 "Inductor by default, on in the plugin's quality mode)")
        parser.add_argument("--search-space-sample", type=int, default=None,
                            help="extra configs of the wide space timed per input (plugin default if unset)")
        parser.add_argument("--memory-limit-gb", type=float, default=DEFAULT_MEMORY_LIMIT_BYTES / 2**30,
                            help="a, b and out must fit this (a fixed number, so samples do not depend on the GPU)")
        parser.add_argument("--batch-memory-gb", type=float, default=40.0,
                            help="a batch's operands and outputs together stay within this (an input "
                                 "larger than it runs alone)")
        parser.add_argument("--batch-gpu-ms", type=float, default=20.0,
                            help="a batch's inputs together stay within this estimated GPU time of one call "
                                 "each (nominal peak rates); a costlier input runs alone, so one huge input "
                                 "does not hold a whole batch past the time budget")
        parser.add_argument("--max-estimated-ms", type=float, default=None,
                            help="leave out inputs whose one call is estimated above this (nominal peak rates); "
                                 "they are counted as excluded, not journaled, so a later run without the "
                                 "flag still measures them. Off by default: the upstream distribution whole")
        parser.add_argument("--warmup-mode", choices=("compile", "benchmark"), default="compile",
                            help="'compile': warm-up compiles run each candidate once instead of timing it "
                                 "(its kernels are built and loaded, nothing is benchmarked); 'benchmark': "
                                 "a full autotuning, as the logged repetitions")
        parser.add_argument("--warmup-reps", type=int, default=None,
                            help="compiles per batch whose timings are not logged (default: 1 on CUDA, 0 on "
                                 "CPU). In a batch, one mm is benchmarked while the candidates of the others "
                                 "are still compiling on every CPU core, which inflates the times of small, "
                                 "launch-bound kernels; the warm-up compile fills the batch's kernel cache so "
                                 "the logged repetitions are benchmarked with no compilation running")
        parser.add_argument("--compile-pool", choices=("in-process", "inductor"), default="in-process",
                            help="where a GPU worker compiles autotuning candidates. 'in-process' (default): in "
                                 "threads of the worker itself (Inductor's compile_threads = 1; the precompile "
                                 "threads stay TORCHINDUCTOR_COMPILE_THREADS), so the kernels the warm-up builds "
                                 "and loads are the ones the logged repetitions run; 2.4-3.3x the inputs per "
                                 "GPU-minute of 'inductor' on the H200, same timings (docs/datagen.md, 'Compile "
                                 "pool'). 'inductor': Inductor's subprocess pool; once it is up, the worker loads "
                                 "each candidate again in the first logged repetition, under the device lock")
        parser.add_argument("--shape-padding", choices=("auto", "off"), default="auto",
                            help="'auto': Inductor's pad_mm pass pads unaligned inputs when it finds that faster, "
                                 "so the padded GEMM is what gets logged; 'off': no padding, so the unaligned "
                                 "GEMM itself is timed and logged (what a compile meets when pad_mm declines, "
                                 "e.g. 128x768x2) (default: %(default)s)")
        parser.add_argument("--cache-root", default=None,
                            help="where per-input Inductor cache folders are made (default: system temp)")

    def parse_args(self, argv=None):
        args = super().parse_args(argv)
        try:
            self.dtypes(args)
            if args.shapes:
                self._check_one_op(args)
        except ValueError as exc:
            self.parser.error(str(exc))
        return args

    def _check_one_op(self, args) -> None:
        """A shapes file's rows are all of the op this run collects (int8 rows are int_mm, others mm)."""
        op = self.collected_op(args, "cuda")
        other = next((inp for inp in self._shapes(args) if inp.op != op), None)
        if other is not None:
            raise ValueError(f"--shapes {args.shapes}: {other.describe()} is an {other.op} input, but this run "
                             f"collects {op} (--dtypes {args.dtypes}); int8 rows go in a run with --dtypes int8, "
                             "the others in one without")

    def dtypes(self, args) -> tuple[str, ...]:
        out = []
        for item in args.dtypes.split(","):
            item = item.strip()
            name = _DTYPE_NAMES.get(item, item)
            if name not in (*DTYPES, INT8):
                raise ValueError(f"--dtypes: unknown dtype {item!r} (expected bf16, fp16, fp32, or int8 alone)")
            out.append(name)
        if INT8 in out and len(set(out)) > 1:
            raise ValueError("--dtypes: int8 GEMMs are another op (int_mm) with a log of their own: "
                             "collect them in a run of their own (--dtypes int8)")
        if INT8 in out and (getattr(args, "device", None) or "cuda").startswith("cpu"):
            raise ValueError("--dtypes int8: Inductor autotunes int8 GEMMs on CUDA only; drop --device cpu")
        return tuple(out)

    def collected_op(self, args, device: str) -> str:
        """The op this run logs: packed_linear on the CPU, int_mm for int8, else mm."""
        if device == "cpu":
            return "packed_linear"
        return "int_mm" if self.dtypes(args) == (INT8,) else "mm"

    # --- inputs ----------------------------------------------------------------------------------------

    def _shapes(self, args) -> list[MMInput]:
        if self._shapes_cache is None or self._shapes_cache[0] != args.shapes:
            self._shapes_cache = (args.shapes, read_shapes_file(args.shapes, dtypes=self.dtypes(args)))
        return self._shapes_cache[1]

    def total_inputs(self, args) -> int:
        if args.shapes:
            available = max(0, len(self._shapes(args)) - args.first_sample)
            return available if args.num_samples is None else min(args.num_samples, available)
        return super().total_inputs(args)

    def make_input(self, index: int, args) -> dict:
        if args.shapes:
            return self._shapes(args)[index].to_dict()
        limit = int(args.memory_limit_gb * 2**30)
        return sample_mm_input(args.seed, index, memory_limit_bytes=limit, dtypes=self.dtypes(args)).to_dict()

    def describe_input(self, spec: dict) -> str:
        return MMInput.from_dict(spec).describe()

    def batch_key(self, spec: dict, args):
        """One dtype per batch, and for fp32 one TF32 setting (a global flag set before compiling)."""
        inp = MMInput.from_dict(spec)
        return (inp.dtype, bool(inp.allow_tf32) if inp.dtype == "float32" else None)

    def batch_weight(self, spec: dict, args) -> float:
        """The larger of the input's share of ``--batch-memory-gb`` (split between the workers sharing a GPU,
        which hold their batches at the same time) and of ``--batch-gpu-ms``."""
        inp = MMInput.from_dict(spec)
        memory = input_bytes(inp) / (args.batch_memory_gb / max(1, getattr(args, "workers_per_gpu", 1)) * 2**30)
        cost = estimated_call_ms(inp) / args.batch_gpu_ms if args.batch_gpu_ms > 0 else 0.0
        return max(memory, cost)

    def batch_weight_limit(self, args) -> float:
        return 1.0

    def work_estimate(self, batch, args) -> float:
        """Rough H200 seconds of a batch, for dealing batches to torchrun ranks: per input a fixed share
        (the warm-up compile of its candidates) and per repetition a part that grows with the call's time
        (every candidate benchmarked). Fitted on a one-GPU H200 run of 10 inputs (benchmarks/RESULTS.md,
        multigpu_collect)."""
        return sum(_WORK_PER_INPUT_S + args.num_reps * (_WORK_PER_REP_S + _WORK_PER_REP_PER_CALL_MS
                                                        * estimated_call_ms(MMInput.from_dict(t.spec)))
                   for t in batch)

    def exclude_reason(self, spec: dict, args) -> str | None:
        if args.max_estimated_ms is None:
            return None
        estimate = estimated_call_ms(MMInput.from_dict(spec))
        if estimate > args.max_estimated_ms:
            return f"estimated {estimate:.0f} ms per call > --max-estimated-ms {args.max_estimated_ms:g}"
        return None

    def input_features(self, spec: dict, args) -> dict | None:
        """The plugin's own mm feature columns for this input, as text (for resumption from the log)."""
        if args.device == "cpu":
            return None  # the CPU path logs packed_linear with other columns; the journal suffices
        from ah_plugin.collect import features

        inp = MMInput.from_dict(spec)
        values, _, _ = features.op_features(inp.op, mm_tensor_descriptions(inp), inp.allow_tf32)
        return {name: str(value) for name, value in values.items()}

    # --- worker side -----------------------------------------------------------------------------------

    def worker_env(self, args, device: str) -> dict:
        op = self.collected_op(args, device)
        env = {ENV_LOG_PATH: os.path.abspath(self.log_path_for(args))}
        env[ENV_USE if args.use_heuristic else ENV_COLLECT] = op
        env[ENV_SEARCH_SPACE] = args.search_space
        env[ENV_TIMING] = args.timing
        if args.persistent_tma:
            env[ENV_PERSISTENT_TMA] = "1"
        if args.search_space_sample is not None:
            env[ENV_SEARCH_SAMPLE] = str(args.search_space_sample)
        # the host's cores are shared by this process's GPU workers and, under torchrun, by the other
        # ranks on this host
        workers = self.worker_count(args) * distributed.rank_info().local_world_size
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(max(1, usable_cores() // workers))
        if compiles_in_process(args, device):
            env["TORCH_WARM_POOL"] = "0"  # no subprocess pool started at import, only to go unused
        return env

    def finish(self, args, log_path: str, summary) -> None:
        """Say so when a GPU run asked for replay timing and the log's metadata says otherwise (the rows
        are then per-call data: the trainers and merge_data keep the two apart)."""
        if args.timing != "replay" or (args.device or "cuda").startswith("cpu") or not os.path.exists(log_path):
            return
        with open(log_path, encoding="utf-8") as f:
            first = f.readline()
        try:
            method = json.loads(first).get("timing")
        except ValueError:
            return
        if method != "cudagraph_replay":
            print(f"{self.name}: warning: {log_path}:1: the rows were timed per call, not by CUDA-graph replay "
                  "as --timing replay asked; treat this log as per-call data", file=sys.stderr)

    def log_path_for(self, args) -> str:
        return distributed.rank_output_path(args.output, distributed.rank_info())

    def worker_count(self, args) -> int:
        try:
            return len(self.worker_devices(args, distributed.rank_info()))
        except ValueError:
            return 1

    def setup_worker(self, args, device: str) -> None:
        import torch  # lazy: only the worker imports torch (and the plugin's adapter), never the runner's parent

        from ah_plugin.inductor import collection, compile_tools

        self._lock = device_lock.from_environment(before_release=lambda: self._synchronize(torch))
        if self._lock is not None:
            collection.check_turn_taking_hooks()

        self._cache_root = args.cache_root
        if self._cache_root:
            os.makedirs(self._cache_root, exist_ok=True)
        collection.configure_for_collection()
        if getattr(args, "shape_padding", "auto") == "off":
            collection.no_shape_padding()
        torch.compiler.config.force_disable_caches = False  # a fresh cache folder per compile recompiles kernels
        if compiles_in_process(args, device):
            collection.compile_in_process()
        if device == "cpu":
            compile_tools.freeze_constant_weights()
            self.device = "cpu"
        else:
            if not torch.cuda.is_available():
                raise RuntimeError(f"worker for {device}: CUDA is not available")
            torch.cuda.set_device(0)  # the runner shows each worker only its own GPU
            self.device = "cuda"
        import ah_plugin

        # the rows must come from our collector: switched on here too if torch's entry point did not
        status = ah_plugin.require_active_from_environment()
        print(f"worker ready: torch {torch.__version__} on {self._device_name(torch)}; "
              f"plugin status {status}", flush=True)

    def _device_name(self, torch) -> str:
        if self.device == "cuda":
            return torch.cuda.get_device_name(0)
        return "cpu"

    def run_sample(self, spec: dict, reps: int, args, device: str) -> dict:
        return self.run_batch([spec], reps, args, device)[0]

    def run_batch(self, specs: list[dict], reps: int, args, device: str) -> list[dict]:
        """Compile one function of every input of the batch ``reps`` times; each compile autotunes every
        mm afresh and the collector logs them. Raises on any failure (the runner then retries singly)."""
        import torch  # lazy: only the worker imports torch (and the plugin's adapter), never the runner's parent

        from ah_plugin.inductor import collection

        inputs = [MMInput.from_dict(spec) for spec in specs]
        if len({self.batch_key(spec, args) for spec in specs}) != 1:
            raise ValueError("a batch must hold one dtype and one TF32 setting")
        if self.device == "cuda":
            _set_tf32(torch, inputs[0].allow_tf32)
        faulty = _injected_faults()
        caches = contextlib.ExitStack()
        cache_dir = caches.enter_context(fresh_compile_caches("ah_gen_mm_", self._cache_root))
        seconds = []
        warmup = getattr(args, "warmup_reps", None)
        if warmup is None:
            warmup = 1 if self.device == "cuda" else 0
        log_env = self.log_path_env
        logged_path = os.environ.get(log_env) if log_env else None
        lock = self._lock
        if lock is not None:
            lock.take_stats()  # a failed batch's turns are not this batch's
        try:
            with held_or_nothing(lock):
                fn, operands = self._case(torch, inputs)
                self._synchronize(torch)
            for rep in range(warmup + reps):
                if log_env and logged_path:  # warm-up compiles log into the throw-away cache folder
                    os.environ[log_env] = os.path.join(cache_dir, "warmup_rows.txt") if rep < warmup else logged_path
                torch.compiler.reset()
                launch_only = rep < warmup and args.warmup_mode == "compile"
                start = time.perf_counter()
                # pad_mm caches its "pad or not" decision for the repetitions: the warm-up takes it from real
                # benchmarks, so the padded mm's candidates are built here too; workers sharing the GPU, and a
                # torch where that cannot be arranged, get a warm-up that decides no padding at all
                pad_decisions = contextlib.nullcontext()
                if launch_only:
                    pad_decisions = collection.real_pad_decisions() if lock is None else None
                    if pad_decisions is None or not pad_decisions.usable:
                        pad_decisions = collection.padding_off()
                if launch_only and lock is not None:
                    # compile outside the turn; what touches the GPU (autotuning's example inputs and output
                    # buffers, running the compiled graph) takes it
                    compiled = torch.compile(fn, backend=self._turn_taking_backend(collection, lock), dynamic=False)
                    with torch.no_grad(), pad_decisions, collection.launch_only_benchmarks(launch=False), \
                            collection.autotune_device_work_in_turn(lock):
                        outputs = compiled(*operands)
                else:
                    compiled = torch.compile(fn, mode=COMPILE_MODE, dynamic=False)
                    with held_or_nothing(lock), torch.no_grad(), pad_decisions, (
                            collection.launch_only_benchmarks() if launch_only else contextlib.nullcontext()):
                        outputs = compiled(*operands)
                        self._synchronize(torch)
                seconds.append(round(time.perf_counter() - start, 3))
                del outputs
                bad = [inp.describe() for inp in inputs if (inp.m, inp.k, inp.n) in faulty]
                if bad:
                    raise RuntimeError(f"injected fault ({ENV_INJECT_FAULT}) for {', '.join(bad)}")
        finally:
            if log_env and logged_path:
                os.environ[log_env] = logged_path
            caches.close()
            torch.compiler.reset()
            if self.device == "cuda":
                with held_or_nothing(lock):  # frees synchronize the device
                    torch.cuda.empty_cache()
        info = {"compile_seconds": seconds, "batch": len(inputs), **collection.compile_pool_info(),
                "shape_padding": collection.shape_padding_on()}
        if lock is not None:
            info.update(lock.take_stats())
        return [dict(info) for _ in inputs]

    def _synchronize(self, torch) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def _turn_taking_backend(self, collection, lock):
        """A Dynamo backend that is Inductor with ``COMPILE_MODE``'s options (what ``torch.compile(mode=...)``
        passes), whose compiled graph runs only while this worker holds the device lock."""

        def in_turn(compiled):
            def run(*args):
                with lock.held():  # its release synchronizes
                    return compiled(*args)

            return run

        return collection.inductor_backend(COMPILE_MODE, wrap=in_turn)

    def _case(self, torch, inputs: list[MMInput]):
        """(callable, operands) computing every input's a @ b in one graph on this worker's device.

        GPU: the operands are graph inputs with the layout's exact strides (a transposed operand is the
        transpose of a contiguous tensor) and the function returns all products as a tuple, so every
        product is an output (no dead code) and a plain ``mm`` (no epilogue that would make it addmm).
        CPU: each ``b`` is a constant weight of one module (packed_linear under freezing)."""
        dev = self.device

        def operand(rows, cols, transposed, dtype):
            shape = (cols, rows) if transposed else (rows, cols)
            if dtype == torch.int8:
                tensor = torch.randint(-128, 128, shape, dtype=dtype, device=dev)
            else:
                tensor = torch.randn(shape, dtype=dtype, device=dev)
            return tensor.t() if transposed else tensor

        lefts, rights = [], []
        for inp in inputs:
            dtype = getattr(torch, inp.dtype)
            lefts.append(operand(inp.m, inp.k, inp.transpose_left, dtype))
            rights.append(operand(inp.k, inp.n, inp.transpose_right, dtype))
        if dev == "cpu":
            return _constant_weights_module(rights).eval(), tuple(lefts)
        operands = tuple(t for pair in zip(lefts, rights) for t in pair)
        return (_int_mm_all if inputs[0].dtype == INT8 else _mm_all), operands

    def classify_error(self, exc: BaseException) -> str:
        if type(exc).__name__ == "OutOfMemoryError":
            return "oom"
        return super().classify_error(exc)

    def after_failure(self, exc: BaseException, args, device: str) -> None:
        import torch  # lazy: only the worker imports torch, never the runner's parent

        torch.compiler.reset()
        if self.device == "cuda":
            torch.cuda.empty_cache()


def _mm_all(*operands):
    """Products of consecutive (a, b) operand pairs, each a separate mm, all returned."""
    return tuple(operands[i] @ operands[i + 1] for i in range(0, len(operands), 2))


def _int_mm_all(*operands):
    """The int8 products (int32 results) of consecutive (a, b) operand pairs, each its own int_mm."""
    import torch  # lazy: only the worker imports torch

    return tuple(torch._int_mm(operands[i], operands[i + 1]) for i in range(0, len(operands), 2))


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under ``taskset``), else the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


_WORK_PER_INPUT_S = 8.0
_WORK_PER_REP_S = 2.0
_WORK_PER_REP_PER_CALL_MS = 1.25


def estimated_call_ms(inp: MMInput) -> float:
    """Rough milliseconds of one call of the input at nominal peak rates (compute or memory bound)."""
    key = inp.dtype
    if inp.dtype == "float32" and inp.allow_tf32:
        key = "float32_tf32"
    flops = 2.0 * inp.m * inp.k * inp.n
    return 1e3 * max(flops / _NOMINAL_FLOPS[key], input_bytes(inp) / _NOMINAL_BYTES_PER_S)


def input_bytes(inp: MMInput) -> int:
    """Bytes of a, b and the output of one input (what it holds on the GPU while its batch runs; an int8
    GEMM writes int32)."""
    if inp.dtype == INT8:
        return inp.m * inp.k + inp.k * inp.n + 4 * inp.m * inp.n
    size = 4 if inp.dtype == "float32" else 2
    return size * (inp.m * inp.k + inp.k * inp.n + inp.m * inp.n)


def _injected_faults() -> set[tuple[int, int, int]]:
    out = set()
    for item in os.environ.get(ENV_INJECT_FAULT, "").split(";"):
        if item.strip():
            out.add(tuple(int(x) for x in item.split(",")))
    return out


def compiles_in_process(args, device: str) -> bool:
    """Whether this worker compiles its candidates in its own threads (``--compile-pool in-process``, GPU
    workers only): the one test behind both the worker's environment and its Inductor config."""
    return device != "cpu" and getattr(args, "compile_pool", "in-process") == "in-process"


def _set_tf32(torch, enabled: bool) -> None:
    """TF32 for fp32 matmuls through ``torch.set_float32_matmul_precision``, which keeps the legacy flag
    (``allow_tf32``, read by Inductor's templates) and the per-backend ``fp32_precision`` (read by the
    plugin) in step. Setting only ``backends.cuda.matmul.fp32_precision`` leaves the global precision
    unset, and Inductor's autotune cache lookup then fails every fp32 compile ("mix of the legacy and new
    APIs" on the H200)."""
    torch.set_float32_matmul_precision("high" if enabled else "highest")


def _constant_weights_module(weights):
    """A module computing ``x_i @ w_i`` for constant weights ``w_i``: under freezing and no_grad each
    product is one packed_linear autotuning of Inductor's CPU path."""
    import torch  # lazy: only the worker imports torch, never the runner's parent

    class ConstantWeightsMM(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            self.weights = torch.nn.ParameterList(
                [torch.nn.Parameter(w, requires_grad=False) for w in weights])

        def forward(self, *xs):
            products = []
            for x, w in zip(xs, self.weights):
                products.append(x @ w)
            return tuple(products)

    return ConstantWeightsMM(weights)


def main(argv=None) -> int:
    return BenchmarkRunnerMM().run(argv)


if __name__ == "__main__":
    sys.exit(main())
