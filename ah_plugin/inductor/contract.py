"""The plugin's contract with Inductor: every hook it uses, what it finds and replaces there, what it does
without it, and how it goes in. The adapter installs from this table (``adapter.install``).

A hook that moved in a new torch must never make the plugin quietly do less, and never take the rest down
with it. Each row lists every torch symbol it replaces or reads (``symbols``, ``"a | b"`` where either will
do; ``params`` the leading parameters the plugin calls one with); its probe checks them all on the running
torch. The adapter puts each row in on its own: a row whose probe fails stays out, and is named to the user
once with the capability it switches off (``report``); a row with ``partial`` goes in for the symbols that
are there and names the others. Rows without a ``module`` put nothing in: Inductor's config entries the
plugin sets per compile, and the tools' facades (``compile_tools``, ``collection``,
``generated_code_capture``, ``graph_trees``), which patch on demand. ``AH_PLUGIN_VERBOSE=1`` prints the
verdict in one line. ``python -m ah_plugin.inductor.contract`` prints the table as docs/inductor_versions.md
shows it, and tests/test_inductor_contract.py checks that the doc matches.

Kinds: ``official`` (an extension point Inductor offers: a choices handler, a callback, a config entry);
``patch`` (the plugin replaces a function, a method or a table entry Inductor calls, restored at uninstall);
``import hook`` (a finder that waits for torch's own import of Inductor); ``tool`` (a facade the tools use).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import torch

from .gemm_ops import expected_ops

CHECKED_ON = ("2.11", "2.13", "2.14", "2.15")

reached: Counter = Counter()  # hook name -> calls seen in this process (cheap: one increment)


def note(name: str) -> None:
    """Count one call of hook ``name`` (tests and the verbose summary read ``reached``)."""
    reached[name] += 1


@dataclass(frozen=True)
class Hook:
    """One row of the contract."""

    name: str  # short key
    needs: str  # the capability: what the plugin needs it for
    where: str  # how it is found, in words
    kind: str  # official, patch, import hook or tool
    without: str  # what the plugin does on a torch without it (said to the user)
    symbols: tuple = ()  # every torch symbol it replaces or reads: dotted paths, "a | b" for either
    params: dict = field(default_factory=dict)  # symbol -> the leading parameters the plugin calls it with
    module: str | None = None  # the adapter module (under ah_plugin.inductor) whose install()/uninstall() put it in
    extra: Callable | None = None  # a further probe: None when fine, else what is wrong
    partial: bool = False  # goes in for the symbols present, naming the others
    cpu_reachable: bool = True  # a real compile on the CPU path reaches it (tests)
    checked_on: tuple = CHECKED_ON


# --------------------------------------------------------------------------- finding symbols

def resolve(path: str):
    """The object at dotted ``path``: a module (its spec when it is not imported yet: found is enough), an
    attribute of one, or a lowering-table entry ``torch._inductor.lowering.lowerings[aten.op]``. Raises
    LookupError, AttributeError or ImportError when absent."""
    if path.endswith("]"):
        table_path, op = path[:-1].split("[")
        table, packet = resolve(table_path), getattr(torch.ops.aten, op.split(".")[-1])
        keys = [key for key in table if key is packet or getattr(key, "overloadpacket", None) is packet]
        if not keys:
            raise LookupError(f"no lowering registered for {op}")
        return table[keys[0]]
    try:
        spec = importlib.util.find_spec(path)
    except ValueError:  # imported, but without the import system's record of it
        raise ImportError(path) from None
    except Exception:  # a parent that is no package (a config module says so its own way): an attribute's path
        spec = None
    if spec is not None:
        return sys.modules.get(path, spec)
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(path)


def _present(symbol: str):
    """(the object, None) for the first alternative of ``symbol`` that resolves, else (None, what is wrong)."""
    problems = []
    for path in (p.strip() for p in symbol.split("|")):
        try:
            return resolve(path), None
        except (AttributeError, ImportError, LookupError) as exc:
            problems.append(f"{path} not found ({type(exc).__name__})")
    return None, " / ".join(problems)


def _leading(obj, wanted: tuple) -> str | None:
    try:
        names = [p for p in inspect.signature(obj).parameters if p != "self"]
    except (TypeError, ValueError):
        return "signature unreadable"
    if tuple(names[: len(wanted)]) != tuple(wanted):
        return f"takes ({', '.join(names[:len(wanted) + 1])}), expected ({', '.join(wanted)})"
    return None


# Modules the probes never import themselves: importing Inductor's CUDA-graph trees stashes objects in the
# importing thread's C++ state, and where that thread was not the main one (a program that first imports
# Inductor in a worker thread) the process then aborted at exit in about one run of six on torch 2.13
# ("terminate called without an active exception"). Their symbols are probed once torch has imported the
# module for a compile with CUDA graphs; until then nothing of them is used (``graph_trees``).
IMPORTED_BY_TORCH_ONLY = ("torch._inductor.cudagraph_trees",)


def _not_imported_yet(symbol: str) -> bool:
    return any(path.strip().startswith(module + ".") and module not in sys.modules
               for path in symbol.split("|") for module in IMPORTED_BY_TORCH_ONLY)


def probe(hook: Hook) -> str | None:
    """None when every symbol of ``hook`` is present as the plugin calls it, else what is wrong (one line);
    a symbol of a module in ``IMPORTED_BY_TORCH_ONLY`` that torch has not imported yet is not probed.
    Never raises (a probe that fails counts as the hook missing)."""
    try:
        problems = []
        for symbol in hook.symbols:
            if _not_imported_yet(symbol):
                continue
            obj, problem = _present(symbol)
            if problem is None and symbol in hook.params:
                wrong = _leading(obj, hook.params[symbol])
                problem = f"{symbol} {wrong}" if wrong else None
            if problem:
                problems.append(problem)
        if not problems and hook.extra is not None:
            extra = hook.extra()
            if extra:
                problems.append(extra)
        return "; ".join(problems) or None
    except Exception as exc:  # a torch so different the probe itself breaks: the hook is missing
        return f"probe failed ({type(exc).__name__}: {exc})"


# --------------------------------------------------------------------------- extra probes

def _benchmark_route() -> str | None:
    """On torches whose ``Benchmarker.benchmark`` dispatches through a registry, the CUDA entry must reach
    the instance's ``benchmark_gpu`` (which the plugin wraps)."""
    from torch._inductor.runtime import benchmarking

    routed = getattr(benchmarking, "_default_cuda_bench", None)
    if routed is not None and "benchmark_gpu" not in inspect.getsource(routed):
        return "Benchmarker.benchmark's CUDA entry no longer calls benchmark_gpu"
    return None


def _loader_wrappable() -> str | None:
    """torch's modules are loaded by a loader with ``exec_module``, the call the import hook wraps."""
    spec = importlib.util.find_spec("torch._inductor")
    if spec is None or not hasattr(spec.loader, "exec_module"):
        return "torch._inductor's loader has no exec_module"
    return None


_FLEX_HOOKS = ("get_flex_attention_fwd_configs", "get_flex_decode_configs", "get_flex_attention_bwd_configs")


def _flex_hook_arguments() -> str | None:
    """Each flex config hook takes the head dim and the dtype by name (2.14 added ``seq_len`` to the forward's)."""
    from torch._inductor.choices import InductorChoices

    for name in _FLEX_HOOKS:
        parameters = inspect.signature(getattr(InductorChoices, name)).parameters
        if "dtype" not in parameters:
            return f"InductorChoices.{name} takes no dtype"
    return None


def _flex_lowerings() -> str | None:
    """Both FlexAttention operators have a lowering in Inductor's table."""
    import torch._inductor.kernel.flex.flex_attention  # noqa: F401 - registers the flex lowerings
    from torch._inductor import lowering

    hop = torch.ops.higher_order
    missing = [name for name in ("flex_attention", "flex_attention_backward")
               if not hasattr(hop, name) or getattr(hop, name) not in lowering.lowerings]
    return f"no lowering registered for torch.ops.higher_order.{', '.join(missing)}" if missing else None


def _lowering_symbols() -> tuple:
    return tuple(f"torch._inductor.lowering.lowerings[aten.{op}]" for op in expected_ops())


# --------------------------------------------------------------------------- the table

_SELECT = "torch._inductor.select_algorithm"
_BENCH = "torch._inductor.runtime.benchmarking"
_PAD = "torch._inductor.fx_passes.pad_mm"
_CONFIG = "torch._inductor.config"

HOOKS: tuple[Hook, ...] = (
    Hook("choices_handler", "see and prune GEMM candidates before code generation; key compiled graphs by "
         "the plugin's mode", "InductorChoices._finalize_template_configs and uuid(), registered with "
         "register_inductor_choices where torch has it, else set as config.inductor_choices_class over the "
         "user's class; each candidate's id put in its KernelTemplateChoice.annotations", "official", "candidates are pruned only after their code is generated (more compile time)",
         symbols=("torch._inductor.choices.InductorChoices._finalize_template_configs",
                  f"torch._inductor.choices.register_inductor_choices | {_CONFIG}.inductor_choices_class",
                  "torch._inductor.virtualized.V"),
         params={"torch._inductor.choices.InductorChoices._finalize_template_configs":
                 ("template_choices", "kernel_inputs", "templates", "op_name")},
         module="choices"),
    Hook("selector_call", "each autotuning's session: its name, inputs, layout and input generators; prune what "
         "the first hook cannot see, the numerical check, the benchmark plan, the off lowering where aten is kept",
         "AlgorithmSelectorCache.__call__(self, name, choices, input_nodes, layout, input_gen_fns, ...) wrapped",
         "patch", "use mode and the results cache act only before code generation, and a GEMM kept on aten is "
         "lowered the max-autotune way", symbols=(f"{_SELECT}.AlgorithmSelectorCache.__call__",),
         params={f"{_SELECT}.AlgorithmSelectorCache.__call__": ("name", "choices", "input_nodes", "layout",
                                                                "input_gen_fns")},
         module="patches.selector"),
    Hook("feedback", "every candidate's time: collection, the results cache's winners, the aten margin (which "
         "raises losing templates' times in the timings Inductor takes its winner from)",
         "select_algorithm.add_feedback_saver", "official",
         "nothing is collected or recorded, and templates win without the aten margin",
         symbols=(f"{_SELECT}.add_feedback_saver",), module="feedback"),
    Hook("lowerings", "lower a GEMM as max-autotune off does where aten is kept (fast mode's off code)",
         "torch._inductor.lowering.lowerings[aten.mm/addmm/bmm/baddbmm/_int_mm/_scaled_mm(_v2)/_grouped_mm/"
         "_scaled_grouped_mm/_sparse_semi_structured_mm/convolution/convolution_backward] (each by the packet or by "
         "the overload Inductor registered; _scaled_mm_v2 and convolution_backward from 2.13)", "patch",
         "a GEMM kept on aten is lowered the max-autotune way (1x1 convolutions rewritten as mms)",
         symbols=_lowering_symbols(), module="patches.lowerings", partial=True),
    Hook("mode_options", "fast and quality modes: mode='max-autotune' autotunes GEMMs only",
         "torch._inductor.list_mode_options(mode, dynamic) wrapped", "patch",
         "mode='max-autotune' keeps its tuning of every kernel (compile time of default max-autotune's order)",
         symbols=("torch._inductor.list_mode_options",),
         params={"torch._inductor.list_mode_options": ("mode", "dynamic")}, module="patches.mode_options"),
    Hook("benchmarker", "time GPU candidates by CUDA-graph replay; bound benchmarks (results cache limits)",
         "the benchmarker instance's benchmark_gpu/benchmark_cpu wrapped; each planned candidate's "
         "ChoiceCaller.benchmark wrapped for its autotuning (and its hash_key, under the results cache's "
         "limits, so Inductor's autotune cache keeps those timings apart)", "patch",
         "candidates are timed per call (collection logs them as per-call timings)",
         symbols=(f"{_BENCH}.benchmarker", f"{_BENCH}.InductorBenchmarker.benchmark_gpu",
                  f"{_BENCH}.Benchmarker.benchmark_cpu", "torch._inductor.ir.ChoiceCaller.benchmark", "torch._inductor.ir.ChoiceCaller.hash_key"),
         params={f"{_BENCH}.InductorBenchmarker.benchmark_gpu": ("_callable",)},
         module="patches.benchmarker", extra=_benchmark_route),
    Hook("pad_mm", "shape padding decided by replay timing, recorded and replayed by the results cache",
         "fx_passes.pad_mm.should_pad(match, mat1, mat2, op, input), get_do_bench, is_padded_faster wrapped; "
         "can_pad, get_alignment_size, get_padded_length read", "patch",
         "padding is decided by Inductor's per-call benchmark and not recorded",
         symbols=(f"{_PAD}.should_pad", f"{_PAD}.get_do_bench", f"{_PAD}.is_padded_faster", f"{_PAD}.can_pad",
                  f"{_PAD}.get_alignment_size", f"{_PAD}.get_padded_length"),
         params={f"{_PAD}.should_pad": ("match", "mat1", "mat2", "op")}, module="patches.pad_mm",
         cpu_reachable=False),
    Hook("compile_once", "a benchmarked template that wins runs the binary its autotuning compiled",
         "codegen.triton.TritonScheduling._emit_kernel_to_wrapper(wrapper, kernel, src_code, kernel_name, "
         "subs_name, node_schedule, kernel_path, get_kernel_metadata) wrapped", "patch",
         "a winning template is compiled a second time",
         symbols=("torch._inductor.codegen.triton.TritonScheduling._emit_kernel_to_wrapper",
                  f"{_SELECT}.TritonTemplateKernel", "torch._inductor.codegen.triton.async_compile"),
         params={"torch._inductor.codegen.triton.TritonScheduling._emit_kernel_to_wrapper":
                 ("wrapper", "kernel", "src_code", "kernel_name", "subs_name", "node_schedule", "kernel_path",
                  "get_kernel_metadata")}, module="patches.compile_once", cpu_reachable=False),
    Hook("fusion_timing", "quality mode: a template fused with its neighbour is kept only when the group, timed "
         "by replay, beats the fastest choice plus the separate kernel by the aten margin; where no template may "
         "be timed fused (fast mode), a neighbour (epilogue or prologue) is not timed alone",
         "Scheduler.speedup_by_fusion(self, node1, node2) wrapped (its deferred FusionResult.callable_fn too); "
         "the instance's benchmark_codegened_module scaled for the decision; with no fused template to time, "
         "its benchmark_fused_nodes answers the neighbour alone uncompiled", "patch",
         "Inductor decides fusion by per-call timing, with no margin, and times a neighbour alone for nothing",
         symbols=("torch._inductor.scheduler.Scheduler.speedup_by_fusion",
                  "torch._inductor.scheduler.Scheduler.benchmark_codegened_module",
                  "torch._inductor.scheduler.Scheduler.benchmark_fused_nodes",
                  "torch._inductor.ir.MultiTemplateBuffer"),
         params={"torch._inductor.scheduler.Scheduler.speedup_by_fusion": ("node1", "node2")},
         module="patches.fusion_timing", cpu_reachable=False),
    Hook("builtin_gate", "keep torch's built-in AutoHeuristic off the ops the plugin handles",
         "config.collect_autoheuristic(op) / use_autoheuristic(op) wrapped", "patch",
         "torch's built-in AutoHeuristic also prunes or logs the plugin's ops",
         symbols=(f"{_CONFIG}.collect_autoheuristic", f"{_CONFIG}.use_autoheuristic"),
         params={f"{_CONFIG}.use_autoheuristic": ("name",), f"{_CONFIG}.collect_autoheuristic": ("name",)},
         module="patches.builtin_autoheuristic", cpu_reachable=False),
    Hook("fused_benchmarks", "fast mode benchmarks no template fused with its epilogue",
         "config.max_template_fusion_benchmarked_choices (2.15) / max_epilogue_benchmarked_choices, set in the "
         "mode's options", "official",
         "fast mode compiles and times each kept template fused with its epilogue (slower compile)",
         symbols=(f"{_CONFIG}.max_template_fusion_benchmarked_choices | {_CONFIG}.max_epilogue_benchmarked_choices",)),
    Hook("persistent_tma", "quality mode offers Inductor's persistent TMA mm template",
         "config.triton.enable_persistent_tma_matmul, set in the mode's options", "official",
         "quality mode ranks without that template", symbols=(f"{_CONFIG}.triton.enable_persistent_tma_matmul",)),
    Hook("template_params", "quality mode's padded candidate (off by default) builds its template params",
         "heuristics.template.params.DictKernelTemplateParams (2.14) / template_heuristics.params", "official",
         "the padded candidate is not offered",
         symbols=("torch._inductor.heuristics.template.params.DictKernelTemplateParams | "
                  "torch._inductor.template_heuristics.params.DictKernelTemplateParams",), cpu_reachable=False),
    Hook("wide_space", "collection's wider Triton space (Inductor's exhaustive configs that fit the device)",
         "InductorChoices.get_ktc(kernel_inputs, template, op_name, kwarg_overrides), "
         "config.max_autotune_gemm_search_space", "official", "collection times Inductor's default space",
         symbols=("torch._inductor.choices.InductorChoices.get_ktc", f"{_CONFIG}.max_autotune_gemm_search_space"),
         params={"torch._inductor.choices.InductorChoices.get_ktc": ("kernel_inputs", "template", "op_name")},
         cpu_reachable=False),
    Hook("flex_configs", "FlexAttention: its kernels' configs ranked and narrowed (use) or widened to default "
         "max-autotune's list (collection) before any code exists; put in with the choices handler",
         "InductorChoices.get_flex_attention_fwd_configs / get_flex_decode_configs / "
         "get_flex_attention_bwd_configs(head_dim, [seq_len (2.14+, forward),] dtype, device_type)", "official",
         "FlexAttention keeps the mode's own configs (fast mode: off's one config)",
         symbols=tuple(f"torch._inductor.choices.InductorChoices.{name}" for name in _FLEX_HOOKS),
         params={f"torch._inductor.choices.InductorChoices.{name}": ("head_dim",) for name in _FLEX_HOOKS},
         extra=_flex_hook_arguments, cpu_reachable=False),
    Hook("flex_lowering", "the sizes of the FlexAttention call whose configs are ranked (its query, key and "
         "value, kept while the flex lowering runs)",
         "torch._inductor.lowering.lowerings[torch.ops.higher_order.flex_attention(_backward)] wrapped", "patch",
         "FlexAttention's configs are ranked without the call's sizes (fast mode then keeps off's config)",
         symbols=("torch._inductor.kernel.flex.flex_attention",),
         module="patches.flex_lowering", extra=_flex_lowerings, cpu_reachable=False),
    Hook("graph_trees_stream", "replay captures on the CUDA-graph trees' side stream (a side stream used "
         "after a model's graph was recorded slowed that graph 5% on an H200)",
         "cudagraph_trees.get_manager(device_index, create_if_none_exists).stream", "official",
         "captures run on a stream of the plugin's own",
         symbols=("torch._inductor.cudagraph_trees.get_manager",),
         params={"torch._inductor.cudagraph_trees.get_manager": ("device_index", "create_if_none_exists")},
         cpu_reachable=False),
    Hook("import_hook", "switched on from the environment, the hooks go in when torch imports Inductor, so "
         "import torch imports nothing of it", "a finder first on sys.meta_path wraps the loaders of the "
         "outermost torch.* imports (inductor/on_import.py) until torch._inductor and torch._dynamo are complete",
         "import hook", "switched on from the environment, the plugin imports Inductor at import torch (seconds)",
         symbols=("torch._inductor", "torch._dynamo"), extra=_loader_wrappable, cpu_reachable=False),
    Hook("tool_observers", "the tools' record of what each autotuning offered and timed, and their timing "
         "callbacks (compile_tools.observe_autotunings, on_benchmarked, on_timings)",
         "select_algorithm.add_preprocessing_fn, add_feedback_saver", "tool", "those tools cannot observe autotunings",
         symbols=(f"{_SELECT}.add_preprocessing_fn", f"{_SELECT}.add_feedback_saver"), cpu_reachable=False),
    Hook("tool_compile_counts", "the tools' count of compiled graphs and their recompile limit "
         "(compile_tools.dynamo_graph_count, inductor_graph_count, allow_recompiles)",
         "torch._dynamo.utils.counters, torch._dynamo.config.recompile_limit (or cache_size_limit)", "tool",
         "those tools cannot tell whether a call compiled, nor raise the recompile limit",
         symbols=("torch._dynamo.utils.counters",
                  "torch._dynamo.config.recompile_limit | torch._dynamo.config.cache_size_limit"), cpu_reachable=False),
    Hook("tool_builtin_ranking", "the evaluation's comparison with torch's shipped AutoHeuristic rankings "
         "(compile_tools.builtin_mm_ranking)", "autoheuristic.autoheuristic_utils.AHContext, AHMetadata, "
         "mm_operations", "tool", "the evaluation cannot score torch's shipped rankings",
         symbols=("torch._inductor.autoheuristic.autoheuristic_utils.AHContext",
                  "torch._inductor.autoheuristic.autoheuristic_utils.AHMetadata",
                  "torch._inductor.autoheuristic.autoheuristic_utils.mm_operations"), cpu_reachable=False),
    Hook("tool_benchmark_stubs", "data generation's warm-up that times nothing and its real padding decisions "
         "(collection.launch_only_benchmarks, real_pad_decisions)", "the benchmarker instance's "
         "benchmark_gpu/benchmark_cpu and pad_mm.get_do_bench replaced for a block", "tool",
         "data generation's warm-up times every candidate",
         symbols=(f"{_BENCH}.benchmarker", f"{_PAD}.get_do_bench"), cpu_reachable=False),
    Hook("tool_turn_taking", "workers sharing a GPU take turns for the autotuning steps that touch it "
         "(collection.autotune_device_work_in_turn)", "AlgorithmSelectorCache.benchmark_example_value, "
         "benchmark_choices replaced for a block", "tool", "one data-generation worker per GPU only",
         symbols=(f"{_SELECT}.AlgorithmSelectorCache.benchmark_example_value",
                  f"{_SELECT}.AlgorithmSelectorCache.benchmark_choices"), cpu_reachable=False),
    Hook("tool_code_capture", "the tools' capture of the code Inductor generates (generated_code_capture)",
         "GraphLowering.save_output_code replaced for a block; V.graph's name", "tool",
         "the tools cannot compare generated code",
         symbols=("torch._inductor.graph.GraphLowering.save_output_code", "torch._inductor.virtualized.V"), cpu_reachable=False),
    Hook("tool_graph_trees", "the benchmarks' look at what the CUDA-graph trees hold (graph_trees.function_count, "
         "first_graph)", "cudagraph_trees.get_container(device).tree_manager", "tool",
         "those benchmarks cannot read the trees", symbols=("torch._inductor.cudagraph_trees.get_container",),
         cpu_reachable=False),
)

BY_NAME = {hook.name: hook for hook in HOOKS}


def check() -> dict[str, str | None]:
    """Every hook's verdict on the running torch: None when present as the plugin calls it, else what is
    wrong. Never raises."""
    return {hook.name: probe(hook) for hook in HOOKS}


def missing_line(name: str, problem: str) -> str:
    """What a user reads for a hook that failed: the capability it switches off, why, and what happens."""
    hook = BY_NAME[name]
    return f"{hook.needs}: off ({problem}); {hook.without}"


_said: set = set()


def report(verdicts: dict[str, str | None], warn, verbose) -> None:
    """Name, once per hook per process, every capability a missing hook switches off (``warn(message)``),
    and give the verdict in one line (``verbose(line)``)."""
    new = {name: problem for name, problem in verdicts.items() if problem and name not in _said}
    _said.update(new)
    if new:
        warn(f"ah_plugin: torch {torch.__version__} lacks {len(new)} of the hooks the plugin was checked "
             f"with (torch {', '.join(CHECKED_ON)}): " + " | ".join(missing_line(n, p) for n, p in new.items()))
    if not new and "verdict" in _said:
        return
    _said.add("verdict")
    missing = [missing_line(name, problem) for name, problem in verdicts.items() if problem]
    if not missing:  # the hooks' names mean nothing to a user: they are said only when one is missing
        verbose(f"switched on for torch {torch.__version__} (every Inductor hook it uses is in place)")
    else:
        verbose(f"switched on for torch {torch.__version__}, {len(HOOKS) - len(missing)} of {len(HOOKS)} Inductor "
                f"hooks in place; missing: {' | '.join(missing)}")


# --------------------------------------------------------------------------- the docs' table

def markdown_table() -> str:
    """The hooks as docs/inductor_versions.md shows them (its section between the ``contract-table`` marks)."""
    lines = ["| hook | what the plugin needs | how | kind | without it |", "| --- | --- | --- | --- | --- |"]
    for hook in HOOKS:
        cells = (f"`{hook.name}`", hook.needs, hook.where, hook.kind, hook.without)
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
