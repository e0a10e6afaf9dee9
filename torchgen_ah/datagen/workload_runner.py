"""A BenchmarkRunner whose inputs are the map's workloads (``autotune_families``), compiled under max-autotune
with the plugin's collector on: what the generators of the ops beyond mm share (``torchgen_ah.flex``,
``torchgen_ah.moe``).

A subclass names the ops it collects (``collected``, the collect variable's value), how an input is drawn
(``make_input``, a pure function of seed and index) and which workload it is (``workload``). Each input is
compiled with ``mode="max-autotune-no-cudagraphs"`` ``--num-reps`` times in a fresh Inductor and Triton cache,
every compile autotuning afresh (a training workload runs its backward too), and the collector appends one row
per timed candidate to ``-o``. CUDA only: these ops are autotuned on GPUs.
"""

from __future__ import annotations

import os
import time

from torchgen_ah.datagen.benchmark_runner import BenchmarkRunner
from torchgen_ah.datagen.fresh_caches import fresh_compile_caches

ENV_COLLECT = "TORCHINDUCTOR_AUTOHEURISTIC_COLLECT"
ENV_USE = "TORCHINDUCTOR_AUTOHEURISTIC_USE"
ENV_LOG_PATH = "TORCHINDUCTOR_AUTOHEURISTIC_LOG_PATH"
ENV_TIMING = "AH_PLUGIN_TIMING"


class WorkloadRunner(BenchmarkRunner):
    collected = ""  # the ops logged, comma-separated (the collect variable's value)
    what = ""  # the ops in words, for the message when no GPU is there

    def add_arguments(self, parser) -> None:
        parser.add_argument("--timing", choices=("replay", "per_call"), default="replay",
                            help="how the candidates are timed (the plugin's AH_PLUGIN_TIMING)")

    def parse_args(self, argv=None):
        args = super().parse_args(argv)
        if str(args.device).startswith("cpu"):  # before any worker starts: said once, in the user's words
            self.parser.error(f"needs a CUDA GPU: Inductor autotunes {self.what} on GPUs only "
                              "(this machine has none, or --device cpu was given)")
        return args

    def workload(self, spec: dict, device: str):
        """The ``autotune_families.Workload`` of one input."""
        raise NotImplementedError

    def worker_env(self, args, device: str) -> dict:
        """The collector on for the ops (with ``--use-heuristic``, the use mode instead: the artifacts rank)."""
        switch = ENV_USE if args.use_heuristic else ENV_COLLECT
        return {switch: self.collected, ENV_LOG_PATH: os.path.abspath(args.output), ENV_TIMING: args.timing}

    def setup_worker(self, args, device: str) -> None:
        import torch

        from ah_plugin.inductor import collection

        if device == "cpu" or not torch.cuda.is_available():
            raise RuntimeError(f"{self.name} needs a CUDA GPU: Inductor autotunes {self.what} on GPUs only")
        collection.configure_for_collection()
        torch.cuda.set_device(0)
        import ah_plugin

        status = ah_plugin.require_active_from_environment()
        print(f"worker ready: torch {torch.__version__} on {torch.cuda.get_device_name()}; plugin {status}",
              flush=True)

    def run_sample(self, spec: dict, reps: int, args, device: str) -> dict:
        import torch

        from torchgen_ah.evaluation.studies.autotune_map import _call

        work = self.workload(spec, "cuda")
        fn, inputs = work.build()
        seconds = []
        try:
            with fresh_compile_caches(f"ah_{self.name}_"):
                for _ in range(reps):
                    torch.compiler.reset()
                    start = time.perf_counter()
                    compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
                    _call(compiled, inputs, work.training)
                    torch.cuda.synchronize()
                    seconds.append(round(time.perf_counter() - start, 3))
        finally:
            torch.compiler.reset()
            torch.cuda.empty_cache()
        return {"compile_seconds": seconds}

    def after_failure(self, exc, args, device: str) -> None:
        import torch

        torch.compiler.reset()
        torch.cuda.empty_cache()
