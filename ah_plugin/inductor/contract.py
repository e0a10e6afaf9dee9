"""The plugin's contract with Inductor: every hook it uses, where it is found, the torch versions it was
checked on, and what the plugin does without it.

A hook that moved in a new torch must never make the plugin quietly do less. At install the table is
checked against the running torch (``check``): each hook's probe looks its symbol up and compares the
signature the plugin calls it with, and every hook that fails is named to the user once, with the
capability it switches off (``report``). ``AH_PLUGIN_VERBOSE=1`` prints the verdict in one line.
tests/test_inductor_contract.py checks the table on the torch it runs on, and that a real compile reaches
the hooks the CPU path can reach (``reached`` counts each hook's calls); docs/inductor_versions.md has the
results on each torch.

Kinds: ``official`` (an extension point Inductor offers: a choices handler, a callback, a config entry);
``patch`` (the plugin replaces a function or a table entry Inductor calls, restored at uninstall);
``frame`` (read from a caller's frame).
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import torch

CHECKED_ON = ("2.11", "2.13", "2.14", "2.15")

reached: Counter = Counter()  # hook name -> calls seen in this process (cheap: one increment)


def note(name: str) -> None:
    """Count one call of hook ``name`` (tests and the verbose summary read ``reached``)."""
    reached[name] += 1


@dataclass(frozen=True)
class Hook:
    """One row of the contract."""

    name: str  # short key
    needs: str  # what the plugin needs it for
    where: str  # how it is found
    kind: str  # official, patch or frame
    without: str  # what the plugin does on a torch without it (said to the user)
    probe: Callable[[], str | None]  # None: present as the plugin calls it; else what is wrong
    cpu_reachable: bool = True  # a real compile on the CPU path reaches it (tests)
    checked_on: tuple = CHECKED_ON


def _attr(path: str):
    """The object at dotted ``path`` under ``torch``; raises AttributeError/ImportError when absent."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def _params(path: str, wanted: tuple, positional_only: bool = False) -> Callable[[], str | None]:
    """A probe: ``path`` exists and takes ``wanted`` as its leading parameters (``self`` aside)."""

    def probe():
        try:
            fn = _attr(path)
        except (AttributeError, ImportError) as exc:
            return f"{path} not found ({type(exc).__name__})"
        try:
            names = [p for p in inspect.signature(fn).parameters if p != "self"]
        except (TypeError, ValueError):
            return f"{path}: signature unreadable"
        if tuple(names[: len(wanted)]) != tuple(wanted):
            return f"{path} takes ({', '.join(names[:len(wanted) + 1])}), expected ({', '.join(wanted)})"
        return None

    return probe


def _exists(*paths: str) -> Callable[[], str | None]:
    """A probe: at least one of ``paths`` exists (the first is the current name)."""

    def probe():
        for path in paths:
            try:
                _attr(path)
                return None
            except (AttributeError, ImportError):
                continue
        return f"{' / '.join(paths)} not found"

    return probe


def _config(*names: str) -> Callable[[], str | None]:
    """A probe: Inductor's config has one of ``names``."""

    def probe():
        import torch._inductor.config as inductor_config

        if any(hasattr(inductor_config, n) for n in names):
            return None
        return f"config.{' / config.'.join(names)} not found"

    return probe


def _gemm_lowerings() -> str | None:
    from torch._inductor import lowering

    missing = [op for op in ("mm", "addmm", "bmm", "convolution")
               if getattr(torch.ops.aten, op) not in lowering.lowerings]
    return f"no lowering registered for aten.{', aten.'.join(missing)}" if missing else None


def _benchmark_route() -> str | None:
    """On torches whose ``Benchmarker.benchmark`` dispatches through a registry, the CUDA entry must reach
    the instance's ``benchmark_gpu`` (which the plugin wraps)."""
    from torch._inductor.runtime import benchmarking

    problem = _params("torch._inductor.runtime.benchmarking.InductorBenchmarker.benchmark_gpu", ("_callable",))()
    if problem:
        return problem
    if getattr(benchmarking, "benchmarker", None) is None:
        return "runtime.benchmarking.benchmarker not found"
    routed = getattr(benchmarking, "_default_cuda_bench", None)
    if routed is not None and "benchmark_gpu" not in inspect.getsource(routed):
        return "Benchmarker.benchmark's CUDA entry no longer calls benchmark_gpu"
    return None


def _flex_config_hooks() -> str | None:
    for name in ("get_flex_attention_fwd_configs", "get_flex_decode_configs", "get_flex_attention_bwd_configs"):
        problem = _params(f"torch._inductor.choices.InductorChoices.{name}", ("head_dim", "dtype", "device_type"))()
        if problem:
            return problem
    return None


def _flex_lowerings() -> str | None:
    import torch._inductor.kernel.flex.flex_attention  # noqa: F401 - registers the flex lowerings
    from torch._inductor import lowering

    hop = torch.ops.higher_order
    missing = [name for name in ("flex_attention", "flex_attention_backward")
               if not hasattr(hop, name) or getattr(hop, name) not in lowering.lowerings]
    return f"no lowering registered for torch.ops.higher_order.{', '.join(missing)}" if missing else None


HOOKS: tuple[Hook, ...] = (
    Hook("choices_handler", "see and prune GEMM candidates before code generation; key compiled graphs by "
         "the plugin's mode", "InductorChoices._finalize_template_configs and uuid(), registered with "
         "register_inductor_choices (2.15) or set as config.inductor_choices_class", "official",
         "candidates are pruned only after their code is generated (more compile time)",
         _params("torch._inductor.choices.InductorChoices._finalize_template_configs",
                 ("template_choices", "kernel_inputs", "templates", "op_name"))),
    Hook("preprocessing", "prune what the first hook cannot see, the numerical check, the benchmark plan",
         "select_algorithm.add_preprocessing_fn", "official",
         "use mode and the results cache do not act (Inductor's default choices)",
         _exists("torch._inductor.select_algorithm.add_preprocessing_fn")),
    Hook("feedback", "every candidate's time: collection, the results cache's winners, the aten margin",
         "select_algorithm.add_feedback_saver", "official",
         "nothing is collected or recorded, and templates win without the aten margin",
         _exists("torch._inductor.select_algorithm.add_feedback_saver")),
    Hook("selector_frame", "the op name and inputs of an autotuning outside the wrapped GEMM lowerings (the "
         "CPU's mkldnn linear, mm_plus_mm, custom ops) in the preprocessing function",
         "AlgorithmSelectorCache.__call__(self, name, choices, input_nodes, ...) locals", "frame",
         "those autotunings are pruned only before code generation, where Inductor offers it",
         _params("torch._inductor.select_algorithm.AlgorithmSelectorCache.__call__",
                 ("name", "choices", "input_nodes"))),
    Hook("lowerings", "lower a GEMM as max-autotune off does where aten is kept (fast mode's off code)",
         "torch._inductor.lowering.lowerings[aten.mm/addmm/bmm/baddbmm/convolution/...]", "patch",
         "a GEMM kept on aten is lowered the max-autotune way (1x1 convolutions rewritten as mms)",
         _gemm_lowerings),
    Hook("mode_options", "fast and quality modes: mode='max-autotune' autotunes GEMMs only",
         "torch._inductor.list_mode_options(mode, dynamic)", "patch",
         "mode='max-autotune' keeps its tuning of every kernel (compile time of default max-autotune's order)",
         _params("torch._inductor.list_mode_options", ("mode", "dynamic"))),
    Hook("benchmarker", "time GPU candidates by CUDA-graph replay; bound benchmarks (results cache limits)",
         "runtime.benchmarking.benchmarker.benchmark_gpu/benchmark_cpu on the instance", "patch",
         "candidates are timed per call (collection logs them as per-call timings)", _benchmark_route),
    Hook("pad_mm", "shape padding decided by replay timing, recorded and replayed by the results cache",
         "fx_passes.pad_mm.should_pad(match, mat1, mat2, op, input), get_do_bench, is_padded_faster", "patch",
         "padding is decided by Inductor's per-call benchmark and not recorded",
         _params("torch._inductor.fx_passes.pad_mm.should_pad", ("match", "mat1", "mat2", "op")),
         cpu_reachable=False),
    Hook("compile_once", "a benchmarked template that wins runs the binary its autotuning compiled",
         "codegen.triton.TritonScheduling._emit_kernel_to_wrapper(wrapper, kernel, src_code, kernel_name, "
         "subs_name, node_schedule, kernel_path, get_kernel_metadata)", "patch",
         "a winning template is compiled a second time",
         _params("torch._inductor.codegen.triton.TritonScheduling._emit_kernel_to_wrapper",
                 ("wrapper", "kernel", "src_code", "kernel_name", "subs_name", "node_schedule", "kernel_path",
                  "get_kernel_metadata")), cpu_reachable=False),
    Hook("builtin_gate", "keep torch's built-in AutoHeuristic off the ops the plugin handles",
         "config.collect_autoheuristic(op) / use_autoheuristic(op)", "patch",
         "torch's built-in AutoHeuristic also prunes or logs the plugin's ops",
         _params("torch._inductor.config.use_autoheuristic", ("name",)), cpu_reachable=False),
    Hook("fused_benchmarks", "fast mode benchmarks no template fused with its epilogue",
         "config.max_template_fusion_benchmarked_choices (2.15) / max_epilogue_benchmarked_choices", "official",
         "fast mode compiles and times each kept template fused with its epilogue (slower compile)",
         _config("max_template_fusion_benchmarked_choices", "max_epilogue_benchmarked_choices")),
    Hook("fusion_timing", "quality mode: a template fused with its neighbour is kept only when the group, timed "
         "by replay, beats the fastest choice plus the separate kernel by the aten margin",
         "Scheduler.speedup_by_fusion(self, node1, node2) -> FusionResult(callable_fn=...)", "patch",
         "Inductor decides fusion by per-call timing, with no margin",
         _params("torch._inductor.scheduler.Scheduler.speedup_by_fusion", ("node1", "node2")), cpu_reachable=False),
    Hook("persistent_tma", "quality mode offers Inductor's persistent TMA mm template",
         "config.triton.enable_persistent_tma_matmul", "official", "quality mode ranks without that template",
         _exists("torch._inductor.config.triton.enable_persistent_tma_matmul")),
    Hook("template_params", "quality mode's padded candidate (off by default) builds its template params",
         "heuristics.template.params.DictKernelTemplateParams (2.14) / template_heuristics.params", "official",
         "the padded candidate is not offered",
         _exists("torch._inductor.heuristics.template.params.DictKernelTemplateParams",
                 "torch._inductor.template_heuristics.params.DictKernelTemplateParams"), cpu_reachable=False),
    Hook("wide_space", "collection's wider Triton space (Inductor's exhaustive configs that fit the device)",
         "InductorChoices.get_ktc(kernel_inputs, template, op_name, kwarg_overrides), "
         "config.max_autotune_gemm_search_space", "official", "collection times Inductor's default space",
         _params("torch._inductor.choices.InductorChoices.get_ktc",
                 ("kernel_inputs", "template", "op_name")), cpu_reachable=False),
    Hook("flex_configs", "FlexAttention: its kernels' configs ranked and narrowed (use) or widened to default "
         "max-autotune's list (collection) before any code exists",
         "InductorChoices.get_flex_attention_fwd_configs / get_flex_decode_configs / "
         "get_flex_attention_bwd_configs(head_dim, dtype, device_type)", "official",
         "flex attention keeps the mode's own configs (fast mode: off's one config)", _flex_config_hooks,
         cpu_reachable=False),
    Hook("flex_lowering", "the sizes of the FlexAttention call whose configs are ranked (its query, key and "
         "value)", "torch._inductor.lowering.lowerings[torch.ops.higher_order.flex_attention(_backward)]",
         "patch", "flex configs are ranked without the call's sizes (fast mode then times its first config "
         "against off's)", _flex_lowerings, cpu_reachable=False),
    Hook("graph_trees_stream", "replay captures on the CUDA-graph trees' side stream (a side stream used "
         "after a model's graph was recorded slowed that graph 5% on an H200)",
         "cudagraph_trees.get_manager(device, create_if_none_exists).stream", "official",
         "captures run on a stream of the plugin's own",
         _params("torch._inductor.cudagraph_trees.get_manager", ("device_index", "create_if_none_exists")),
         cpu_reachable=False),
)

_said: set = set()


def check() -> dict[str, str | None]:
    """Every hook's verdict on the running torch: None when present as the plugin calls it, else what is
    wrong. Never raises (a probe that fails counts as the hook missing)."""
    out = {}
    for hook in HOOKS:
        try:
            out[hook.name] = hook.probe()
        except Exception as exc:  # a torch so different the probe itself breaks: the hook is missing
            out[hook.name] = f"probe failed ({type(exc).__name__}: {exc})"
    return out


def missing_lines(verdicts: dict[str, str | None]) -> list[str]:
    """One line per hook that failed: the capability it switches off and why."""
    by_name = {hook.name: hook for hook in HOOKS}
    return [f"{by_name[name].needs}: off ({problem}); {by_name[name].without}"
            for name, problem in verdicts.items() if problem]


def report(warn, verbose) -> dict[str, str | None]:
    """Check the table once per process; ``warn(message)`` names every capability off, ``verbose(line)``
    gets the verdict. Returns the verdicts."""
    verdicts = check()
    if "report" in _said:
        return verdicts
    _said.add("report")
    lines = missing_lines(verdicts)
    if lines:
        warn(f"ah_plugin: torch {torch.__version__} lacks {len(lines)} of the hooks the plugin was checked "
             f"with (torch {', '.join(CHECKED_ON)}): " + " | ".join(lines))
    if not lines:  # the names of the hooks mean nothing to a user: said only when one is missing
        verbose(f"switched on for torch {torch.__version__} (every Inductor hook it uses is in place)")
    return verdicts
