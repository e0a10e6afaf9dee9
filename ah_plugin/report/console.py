"""The ``ah-plugin`` command: every tool of the project under one name, ``ah-plugin <tool> [options]``.

``ah-plugin`` alone (or ``--help``) lists the tools. Each runs the ``main`` of the module named in
``TOOLS``, as ``python -m <module>`` would, and its ``--help`` names it as run here. The older
``python -m torchgen_ah.<name>`` commands, and the studies' ``torchgen_ah.evaluation.<name>`` from before
they moved to ``torchgen_ah.evaluation.studies`` (``OLD_NAMES``), keep working: ``torchgen_ah`` resolves them
from this table. The offline tools need the ``tools`` extra (``pip install 'ah-plugin[tools]'``); a tool
run without it says so in one line. Standard library only: the command starts without torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import NamedTuple

from . import command_line

COMMAND = "ah-plugin"


class Tool(NamedTuple):
    target: str  # "module:function", the function taking argv and returning an exit code
    summary: str
    old_name: str | None = None  # the older ``python -m`` name that still runs it


TOOLS = {
    "demo": Tool("ah_plugin.demo:main", "the whole loop on a small model: collect, train, use, cache"),
    "get-mm-dataset": Tool("torchgen_ah.data.official_datasets:main", "fetch the official A100/H100 mm data",
                           "torchgen_ah.get_mm_dataset"),
    "gen-data-mm": Tool("torchgen_ah.mm.gen_data_mm:main", "collect an mm log: time every choice of sampled shapes"),
    "model-shapes": Tool("torchgen_ah.datagen.model_shapes:main", "collect a log from the GEMMs of real models",
                         "torchgen_ah.model_shapes"),
    "model-gemms": Tool("torchgen_ah.datagen.model_gemms:main", "list the GEMM shapes of models",
                        "torchgen_ah.model_gemms"),
    "merge-data": Tool("torchgen_ah.data.merge:main", "merge logs into one", "torchgen_ah.merge_data"),
    "train-generic": Tool("torchgen_ah.training.train_generic:main", "train a ranking from any operation's log",
                          "torchgen_ah.train_generic"),
    "train-decision-mm": Tool("torchgen_ah.mm.train_decision_mm:main",
                              "train an mm ranking with derived features (torch's MMRanking recipe)"),
    "evaluate": Tool("torchgen_ah.evaluation.evaluate:main", "score policies on shapes timed side by side",
                     "torchgen_ah.evaluate"),
    "eval-worker": Tool("torchgen_ah.evaluation.eval_worker:main", "the timing worker evaluate starts",
                        "torchgen_ah.eval_worker"),
    "compile-cost": Tool("torchgen_ah.evaluation.compile_cost:main",
                         "compile time and kernel time of single GEMMs, plugin modes side by side",
                         "torchgen_ah.compile_cost"),
    "e2e-models": Tool("torchgen_ah.evaluation.e2e_models:main", "compile and step time of whole models per mode",
                       "torchgen_ah.e2e_models"),
    "zoo": Tool("torchgen_ah.evaluation.zoo:main",
                "the model zoo: fast mode against max-autotune off on many models, a fresh process each"),
    "tune": Tool("ah_plugin.tunable.offline:_main", "tune the shapes a results cache recorded untuned"),
}

#: the modules of ``torchgen_ah.evaluation.studies`` (the studies behind benchmarks/RESULTS.md), which
#: were ``torchgen_ah.evaluation.<name>`` before
STUDIES = ("compile_pool_report", "family_timings", "fast_heldout", "gemm_families", "h200_eval_rescore",
           "h200_quality", "kernel_groups", "method_agreement", "model_ceiling", "pad_decision", "quality_ceiling",
           "rep_consistency", "roofline", "run_agreement", "step_profile")

#: older ``python -m`` name -> the module that runs under it
OLD_NAMES = {tool.old_name: tool.target.split(":")[0] for tool in TOOLS.values() if tool.old_name}
OLD_NAMES.update({f"torchgen_ah.evaluation.{name}": f"torchgen_ah.evaluation.studies.{name}" for name in STUDIES})

TOOLS_EXTRA = "pip install 'ah-plugin[tools]'"
#: what the tools extra installs, by import name
TOOLS_PACKAGES = ("pandas", "sklearn", "scipy", "tqdm", "numpy")


def missing_tools_package(name: str) -> str:
    """The one line for a tool whose package is not installed."""
    return f"needs {name}, part of the tools extra: {TOOLS_EXTRA}"


def usage() -> str:
    width = max(map(len, TOOLS))
    lines = [f"usage: {COMMAND} <tool> [options]   ({COMMAND} <tool> --help for a tool's options)", "", "tools:"]
    lines += [f"  {name:<{width}}  {tool.summary}" for name, tool in TOOLS.items()]
    return "\n".join(lines)


def run(name: str, argv: list[str]) -> int:
    """Run tool ``name`` with ``argv``; its exit code."""
    tool = TOOLS[name]
    module_name, function = tool.target.split(":")
    documented = f"python -m {tool.old_name or module_name}"
    try:
        with command_line.run_as(documented, f"{COMMAND} {name}"):
            code = getattr(importlib.import_module(module_name), function)(argv)
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.split(".")[0] not in TOOLS_PACKAGES:
            raise
        print(f"{COMMAND} {name}: error: {missing_tools_package(exc.name)}", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


def main(argv: list[str] | None = None) -> int:
    """``ah-plugin``'s entry point. Output cut short by the reader (``ah-plugin -h | head -1``) ends it
    quietly, as it ends ``head``'s other writers, not with a traceback."""
    try:
        return _main(argv)
    except BrokenPipeError:
        _discard_stdout()
        return 1


def _discard_stdout() -> None:
    """Point standard output at /dev/null: Python flushes it at exit, which would fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    name = args[0]
    if name not in TOOLS:
        from ..config.did_you_mean import hint

        print(f"{COMMAND}: error: no tool {name!r}{hint(name, TOOLS)}; {COMMAND} --help lists them",
              file=sys.stderr)
        return 2
    return run(name, args[1:])


if __name__ == "__main__":
    sys.exit(main())
