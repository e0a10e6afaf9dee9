"""The model zoo: fast mode against max-autotune off on every kind of model a user brings, one command.

    python -m torchgen_ah.evaluation.zoo --out DIR [--models resnet50_cl,...] [--modes off,fast,off_again]
        [--steps one_process|fresh|both] [--compile fresh|one_process] [--reps N] [--once default]
        [--max-minutes 8.5] [--run-timeout 150] [--results benchmarks/RESULTS.md]
    python -m torchgen_ah.evaluation.zoo --combine A/results.jsonl,B/results.jsonl --results benchmarks/RESULTS.md
    python -m torchgen_ah.evaluation.zoo --list

Each (repetition, model, mode) runs in its own process with fresh Inductor and Triton caches (the modes'
environments of ``compile_cost.mode_environment``; ``off_again`` is a second max-autotune-off process, the
identical-code control): its compile is what a user waits for. Steps are judged in one more process per
model and repetition (``--steps one_process``, the default; ``zoo_one_process``), which compiles every mode
again, each inside its own plugin scope and with options made distinct (so Dynamo compiles each afresh), and
times them with interleaved windows: on an H200 the same code stepped 2-20% apart across fresh processes and
0.1-0.3% apart in one process. The modes' own processes then time no steps; ``--steps fresh`` times steps
there instead (and runs no one-process judging), ``both`` does both. ``--compile one_process`` runs the
one-process judging alone: off, compiled first there with fresh caches, gives off's compile, and the other
modes' compile is estimated from their seconds there over the control's (``zoo_report``), a third of the
processes per model. The process warms compile by compile, so odd repetitions compile the control right after
off, before the modes (``zoo_report.one_process_order``): with ``--reps 2`` the estimate is the mean of a
place that leans against the mode and one that leans for it (a single order moved the estimate by up to 0.4x
off's compile on an H100, the same code both times), so there a model's repetitions run one after the other
and a time budget runs them whole. Otherwise repetitions are the outer loop, then models, then the model's
modes, their order rotated from one model to the next, the one-process judging last: a model's processes run
minutes apart at most. A time budget cuts whole models (the last ones), not one mode of a model: a model's
next process starts only while the budget holds it and the model's other
processes not run yet, each taken at 1.2x the model's longest process so far (at ``--min-start`` seconds
before its first; the one-process judging at that times its modes). A model that cannot be built (a library
missing, an API changed) is a named, skipped row and gets no further processes.

What a mode's process records (``zoo_worker``): compile = the wall time of every call that compiled (first
call, a lazily compiled backward, recompiles at new batch sizes); with ``--steps fresh``, step =
``e2e_models``' timed windows of back-to-back calls (CUDA-graph replays on a GPU: off is
``mode="reduce-overhead"``, the max-autotune modes ``mode="max-autotune"``), for the serving pattern one per
batch size and their geometric mean; the generated code's hash and its Triton template kernels; the plugin's
counts; the result against eager PyTorch's. The one-process judging records every window of every mode.
Rows go to ``OUT/results.jsonl`` (``--combine`` joins several runs' files); the report (``zoo_report``) to
``OUT/zoo.md`` and, with ``--results``, the ``zoo`` section of that file; ``--report quality`` writes quality
mode's instead (``zoo_quality_report``: its per-model bars, and the ``*_frozen`` modes beside it) to
``OUT/zoo_quality.md`` and the ``zoo_quality`` section. ``--section NAME --heading TEXT`` puts a report in a
section of its own instead, so a run on another GPU (or another part of the zoo) stands beside the main table
and does not replace it.
"""

from __future__ import annotations

import collections
import os
import shlex
import sys
import time

from ah_plugin.report import command_line
from torchgen_ah.evaluation import compile_cost, e2e_models, zoo_models, zoo_quality_report, zoo_report, zoo_worker
from torchgen_ah.evaluation.zoo_one_process import MODES as ONE_PROCESS_MODES
from torchgen_ah.evaluation.zoo_one_process import ONE_PROCESS
from torchgen_ah.evaluation.results_section import save_report

PROG = "python -m torchgen_ah.evaluation.zoo"
CONTROLS = {"off_again": "off"}  # a control mode: another mode's environment, run once more under its own name
MODES = compile_cost.ALL_MODES + tuple(CONTROLS)
DEFAULT_MODES = ("off", "fast", "off_again")
SECTION = "zoo"
HEADING = "## Model zoo: fast mode against max-autotune off, model by model"
# --report quality: quality mode against its per-model bars (zoo_quality_report), in its own section
QUALITY_SECTION = "zoo_quality"
QUALITY_HEADING = "## Model zoo: quality mode against max-autotune off, model by model"


def rep_modes(modes: list[str], rep: int, once: set[str]) -> list[str]:
    """The modes of repetition ``rep``: ``once`` modes in the first only."""
    return [m for m in modes if rep == 0 or m not in once]


def plan(models: list[str], modes: list[str], reps: int, once: set[str] = frozenset(),
         one_process: bool = False, per_mode: bool = True) -> list[tuple]:
    """(rep, model, mode) in run order: repetitions, then models, then the model's modes rotated by one
    place per model (and repetition), so no mode always runs first or right after another; ``once``
    modes in the first repetition only. ``one_process``: each model's modes end with the process that
    judges their steps together (``ONE_PROCESS``); ``per_mode`` False (with it): that process alone, and
    models, then repetitions: a model's repetitions are its compile estimate's two orders
    (``zoo_report.one_process_order``), so they run one after the other (``Budget`` runs them whole)."""
    if one_process and not per_mode:
        return [(rep, model, ONE_PROCESS) for model in models for rep in range(reps) if rep_modes(modes, rep, once)]
    out = []
    for rep in range(reps):
        these = rep_modes(modes, rep, once)
        for index, model in enumerate(models):
            shift = (rep + index) % len(these) if these else 0
            out += [(rep, model, mode) for mode in these[shift:] + these[:shift]] if per_mode else []
            out += [(rep, model, ONE_PROCESS)] if one_process and these else []
    return out


def done_in(paths: list[str]) -> set[tuple]:
    """(rep, model, mode) measured in earlier runs' results files, and (None, model, None) for a model one
    of them could not build: ``--skip-done`` leaves them out, so a run picks up where others stopped."""
    done = set()
    for path in paths:
        for r in compile_cost.read_results(path):
            if "skipped" in r:
                done.add((None, r["model"], None))
            elif "compile_seconds" in r or "steps" in r:  # a mode's process, or the one judging the steps
                done.add((r.get("rep", 0), r["model"], r["mode"]))
    return done


def remaining(steps: list[tuple], done: set[tuple]) -> list[tuple]:
    """The (rep, model, mode) steps not in ``done`` (``done_in``), nor of a model it could not build."""
    return [s for s in steps if s not in done and (None, s[1], None) not in done]


def not_built(result_path: str, model: str) -> bool:
    """Whether a process of ``model`` wrote a ``skipped`` row (the model could not be built)."""
    return any(r.get("model") == model and "skipped" in r for r in compile_cost.read_results(result_path))


class Budget:
    """Whether a model's next process may start. A model's modes run whole or not at all: the time left must
    hold this process and the model's others not started yet, each taken at 1.2x the model's longest
    process so far (``min_start`` seconds before its first); once one is refused, the model's others are.
    ``weight(step)``: how many processes' time a step takes (the one-process judging: its modes').
    ``whole_reps``: a model's repetitions run whole too (``--compile one_process``, where they are the two
    orders of one compile estimate): a first order without time for the second is not started."""

    def __init__(self, steps: list[tuple], seconds: float, min_start: float, clock=time.time, weight=lambda step: 1,
                 whole_reps: bool = False):
        self._clock = clock
        self.deadline = clock() + seconds
        self._min_start = min_start
        self._whole_reps = whole_reps
        self._unit = (lambda rep, model: model) if whole_reps else (lambda rep, model: (rep, model))
        self._to_run = collections.Counter()
        for step in steps:
            self._to_run[self._unit(*step[:2])] += weight(step)
        self._longest: dict[str, float] = {}
        self._cut: set = set()

    def refuse(self, rep: int, model: str, weight: int = 1) -> str | None:
        """None when the step may start (it is then counted as started), else why not."""
        unit = self._unit(rep, model)
        self._to_run[unit] -= weight
        left = self.deadline - self._clock()
        need = max(self._min_start, 1.2 * self._longest.get(model, 0.0)) * (self._to_run[unit] + weight)
        if unit in self._cut:
            return ("skipped (the time budget cut this model's other repetitions)" if self._whole_reps else
                    f"skipped (time budget: {left:.0f} s left, {need:.0f} s needed)")
        if left < need:
            self._cut.add(unit)
            return f"skipped (time budget: {left:.0f} s left, {need:.0f} s needed)"
        return None

    def took(self, model: str, seconds: float, weight: int = 1) -> None:
        self._longest[model] = max(self._longest.get(model, 0.0), seconds / weight)


def run_plan(steps: list[tuple], args, device: str, result_path: str) -> dict[str, str]:
    """Run each (rep, model, mode) process while the budget allows; returns {label: outcome}."""
    once = set(_names(args.once))

    def weight(step: tuple) -> int:
        return len(rep_modes(_names(args.modes), step[0], once)) if step[2] == ONE_PROCESS else 1

    budget = Budget(steps, args.max_minutes * 60, args.min_start, weight=weight,
                    whole_reps=args.compile == ONE_PROCESS)
    cudagraphs = device == "cuda" and not args.no_cudagraphs
    not_built_models: set[str] = set()
    status = {}
    for rep, model, mode in steps:
        label = f"{model}/rep{rep}/"
        if model in not_built_models:
            continue
        refused = budget.refuse(rep, model, weight((rep, model, mode)))
        if refused:
            status[label + mode] = refused
            continue
        work = os.path.join(args.out, model, f"rep{rep}")
        os.makedirs(work, exist_ok=True)
        start = time.time()
        extra = {"model": model, "rep": rep, "result_path": result_path, "cudagraphs": cudagraphs,
                 "windows": args.windows, "warm_up_seconds": args.warm_up, "time_steps": args.steps != ONE_PROCESS}
        env_mode = CONTROLS.get(mode)
        limit = args.run_timeout * weight((rep, model, mode))
        if mode == ONE_PROCESS:
            extra["modes"] = zoo_report.one_process_order(rep_modes(_names(args.modes), rep, once), rep)
            env_mode = compile_cost.API_ENVIRONMENT
        status.update(compile_cost.run_steps([mode], budget.deadline, lambda step, left, work=work, extra=extra,
                                             env_mode=env_mode, limit=limit: (
            compile_cost.run_mode(step, [], device, work, min(left, limit), "torchgen_ah.evaluation.zoo",
                                  extra=extra, env_mode=env_mode)), label=label, process_limit=limit))
        budget.took(model, time.time() - start, weight((rep, model, mode)))
        if not_built(result_path, model):
            not_built_models.add(model)
    return status


def write_report(text: str, out: str, results_md: str | None, report: str = "fast", section: str | None = None,
                 heading: str | None = None) -> None:
    """OUT/zoo.md (or zoo_quality.md) and, with ``results_md``, the report's section there: the report's own
    (zoo, zoo_quality) unless ``section`` names another, under ``heading`` when given."""
    name, default_section, default_heading = (("zoo_quality.md", QUALITY_SECTION, QUALITY_HEADING)
                                              if report == "quality" else ("zoo.md", SECTION, HEADING))
    save_report(text, out, name, results_md, section or default_section, heading or default_heading)


def _section_arguments(args) -> str:
    """The command line's words that choose the report and its section, to print in the report's command."""
    words = " --report quality" if args.report == "quality" else ""
    if args.section:
        words += f" --section {shlex.quote(args.section)}"
    if args.heading:
        words += f" --heading {shlex.quote(args.heading)}"
    return words


def report_text(report: str, rows: list[dict], command: str, status: dict | None = None,
                note: str | None = None) -> str:
    """The report ``--report`` names: fast mode's (zoo_report) or quality mode's (zoo_quality_report)."""
    if report == "quality":
        return zoo_quality_report.markdown(rows, command, status, note=note)
    return zoo_report.markdown(rows, command, status, note=note)


def list_text() -> str:
    rows = [f"{name:26} {e.kind:8} batch {','.join(map(str, e.batches)) or e.batch:<22} {e.about}"
            + ("" if e.in_zoo else "  [not in the default list]") for name, e in zoo_models.ENTRIES.items()]
    return "\n".join(rows)


def _names(text: str) -> list[str]:
    return [compile_cost.mode_name(x.strip()) for x in text.split(",") if x.strip()]


def main(argv=None) -> int:
    parser = command_line.parser(PROG, __doc__.split("\n")[0])
    parser.add_argument("--out", default="zoo_out", help="folder for logs, caches, results.jsonl and zoo.md")
    parser.add_argument("--models", default=",".join(zoo_models.ZOO),
                        help="comma-separated zoo entries (--list shows them all)")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--reps", type=int, default=None,
                        help="repetitions: fresh processes per (model, mode) and one-process judgings per model "
                             "(default: 1; 2 with --compile one_process, the compile estimate's two orders)")
    parser.add_argument("--once", default="",
                        help="comma-separated modes of --modes run in the first repetition only (e.g. default)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available, else cpu)")
    parser.add_argument("--no-cudagraphs", action="store_true",
                        help="compile with max-autotune-no-cudagraphs / no mode instead of the CUDA-graph modes")
    parser.add_argument("--max-minutes", type=float, default=8.5,
                        help="time budget of the run: no process starts after it, and the report is written")
    parser.add_argument("--run-timeout", type=float, default=150.0, help="seconds one process may take")
    parser.add_argument("--min-start", type=float, default=30.0,
                        help="seconds a process of a model not run yet is taken to need: the model starts only while "
                             "the budget holds that many for each of its processes")
    parser.add_argument("--steps", choices=(ONE_PROCESS, "fresh", "both"), default=ONE_PROCESS,
                        help="where steps are timed: one_process, a process per model compiling every mode, "
                             "windows interleaved (the fresh processes then time none); fresh, each mode's own "
                             "process; both")
    parser.add_argument("--compile", choices=("fresh", ONE_PROCESS), default="fresh",
                        help="where compile is measured: fresh, a fresh process per (model, mode) besides the "
                             "one-process judging; one_process, that judging alone (off compiled first there, with "
                             "fresh caches, is off's fresh compile; the other modes estimated from their seconds over "
                             "the control's): a third of the processes, for a zoo-wide run within a device call; "
                             "needs --steps one_process and --modes starting with off and holding off_again")
    parser.add_argument("--windows", type=int, default=e2e_models.STEP_WINDOWS,
                        help="timed windows per step time (the median window's time per call; in one process, "
                             "rounds of one window per mode)")
    parser.add_argument("--warm-up", type=float, default=e2e_models.WARMUP_SECONDS,
                        help="seconds of untimed steps before the windows (at each batch size)")
    parser.add_argument("--results", default=None, help="also write the report as the zoo section of this file")
    parser.add_argument("--skip-done", default="", metavar="FILES",
                        help="comma-separated results files of earlier runs: the (rep, model, mode) processes measured "
                             "there, and the models they could not build, are not run again (missing files: none done)")
    parser.add_argument("--list", action="store_true", help="print the zoo's entries and exit")
    parser.add_argument("--report", choices=("fast", "quality"), default="fast",
                        help="fast: fast mode against its bars (section zoo); quality: quality mode against its "
                             "per-model bars (section zoo_quality; run with --modes off,quality,off_again)")
    parser.add_argument("--section", default=None, metavar="NAME",
                        help="with --results: write the report into this section instead of zoo / zoo_quality "
                             "(e.g. zoo_h100 for a run on another GPU)")
    parser.add_argument("--heading", default=None, metavar="TEXT",
                        help="with --section: the section's heading line (default: the report's own)")
    compile_cost.add_combine_arguments(parser)
    args = compile_cost.parse_or_work(parser, argv, zoo_worker.run)
    if args.section is not None and not args.section.replace("_", "").isalnum():
        return command_line.fail("zoo", ValueError(f"--section {args.section!r}: letters, digits and _ only"), 2)
    if args.heading is not None and not args.heading.startswith("#"):
        return command_line.fail("zoo", ValueError(f"--heading {args.heading!r}: a markdown heading starts with '#'"), 2)
    if args.list:
        print(list_text())
        return 0
    if args.combine:
        rows = compile_cost.combined_results("zoo", args.combine.split(","))
        if isinstance(rows, int):
            return rows
        command = f"{PROG} --combine {shlex.quote(args.combine)}" + _section_arguments(args)
        write_report(report_text(args.report, rows, command, note=args.note), args.out, args.results, args.report,
                     args.section, args.heading)
        return 0
    models, modes, once = _names(args.models), _names(args.modes), set(_names(args.once))
    unknown = [m for m in models if m not in zoo_models.ENTRIES] + [m for m in modes if m not in MODES]
    if unknown or not models or not modes:
        return command_line.fail("zoo", ValueError(
            f"unknown or no model or mode ({', '.join(unknown) or 'none given'}); models: "
            f"{', '.join(zoo_models.ENTRIES)}; modes: {', '.join(MODES)}"), 2)
    if once - set(modes):
        return command_line.fail("zoo", ValueError(f"--once names {', '.join(sorted(once - set(modes)))}, "
                                                   f"not in --modes ({', '.join(modes)})"), 2)
    if args.steps != "fresh" and (set(modes) - set(ONE_PROCESS_MODES) or "off" not in modes):
        return command_line.fail("zoo", ValueError(
            f"--steps {args.steps}: the modes judged in one process must include off and be of "
            f"{', '.join(ONE_PROCESS_MODES)} (given: {', '.join(modes)}); use --steps fresh"), 2)
    if args.compile == ONE_PROCESS and (args.steps != ONE_PROCESS or modes[0] != "off" or "off_again" not in modes
                                        or {"off", "off_again"} & once):
        return command_line.fail("zoo", ValueError(
            f"--compile one_process: off's compile is its first compile in the one process and the others are "
            f"estimated against the control, so it needs --steps one_process (given: {args.steps}) and --modes "
            f"starting with off and holding off_again, neither of them in --once (given: {', '.join(modes)})"), 2)
    if args.reps is None:
        args.reps = 2 if args.compile == ONE_PROCESS else 1
    if args.reps < 1:
        return command_line.fail("zoo", ValueError(f"--reps {args.reps}: must be at least 1"), 2)
    device = compile_cost.pick_device(args.device)
    result_path = compile_cost.fresh_results_path(args.out)
    steps = remaining(plan(models, modes, args.reps, once, one_process=args.steps != "fresh",
                           per_mode=args.compile == "fresh"),
                      done_in(_names(args.skip_done)))
    status = run_plan(steps, args, device, result_path)
    rows = compile_cost.read_results(result_path)
    command = f"{PROG} " + shlex.join(argv if argv is not None else sys.argv[1:])
    write_report(report_text(args.report, rows, command, status), args.out, args.results, args.report,
                 args.section, args.heading)
    return 0 if any("step_ms" in r or "steps" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
