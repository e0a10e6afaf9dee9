"""Where one mode's compile time goes that another's does not: a zoo model's modes compiled in one process,
in the order given, each as the zoo's one-process judging compiles it (its plugin scope, its options made
distinct), the chosen ones under cProfile, and the functions that took more time in one than in the other.

    python -m torchgen_ah.evaluation.studies.compile_profile --model flex_prefill_document
        [--modes off,off_again,fast] [--profile off_again,fast] [--out DIR] [--device cuda] [--no-cudagraphs]

Fresh processes compile the same code up to 36% apart on the GPU machine (the two off processes of a
FlexAttention model: 6.6 and 9.0 s), so a fresh-process ratio cannot say where a mode's extra second goes.
In one process every mode lowers and generates its code (Inductor's caches of whole graphs are switched off)
and compiles its kernels cold, in caches of its own (``own_kernel_caches``: a kept template renumbers the
kernels after it, so a mode finding off's kernels compiled recompiled those while the control did not);
``off_again`` is the control. Profiled compiles run slower than plain ones (cProfile's own cost, most on Python-heavy phases);
the diff compares two profiled compiles, so the cost hits both. cProfile sees this thread only: work in
Inductor's compile workers shows as time waiting on their results. Output: per mode the wall seconds of its
first calls, its Dynamo graphs and whether its code is off's; per profiled mode ``DIR/<model>_<mode>.txt``
(top functions by cumulative and own time); for the last two profiled modes ``DIR/<model>_diff.txt``, the
functions by the cumulative seconds the second spent over the first. A function that calls itself counts its
nested calls again in cumulative time (20 s of ``codegen_node`` in an 8 s compile), so the own-time rows and the
phase table are the ones to read for sizes: ``DIR/<model>_phases.txt`` gives every mode's seconds per phase by
Dynamo's and Inductor's own wall-clock timers (``torch._dynamo.utils.compilation_time_metrics``: nested phases,
waits on the compile workers included) and the plugin's (``ah_plugin.gemm_lowering`` and its parts, from
``ah_plugin.inductor.plugin_timers``), the phases where a mode took at least ``PHASE_FLOOR`` s, and each
plugin mode's seconds over the control's, whichever came first. ``--profile ''`` profiles no mode: phase times
without cProfile's cost.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import shutil
import sys
import tempfile

PROG = "python -m torchgen_ah.evaluation.studies.compile_profile"
PHASE_FLOOR = 0.05  # seconds: phases shorter in every mode are left out of the phase table
CONTROL = "off_again"  # off compiled again: what a mode compiled after off is compared with


def phase_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The seconds each phase gained between two ``compile_tools.phase_seconds`` snapshots (phases that gained
    nothing left out)."""
    return {name: after[name] - before.get(name, 0.0) for name in after if after[name] > before.get(name, 0.0)}


def phase_table(phases: dict[str, dict[str, float]], floor: float = PHASE_FLOOR) -> str:
    """Markdown: a row per phase where some mode took at least ``floor`` s, every mode's seconds (in the order
    compiled), and each plugin mode's over the control's (``off_again``, in either order; without it, the last
    mode's over the one before it), largest phase first."""
    modes = list(phases)
    names = {name for seconds in phases.values() for name, t in seconds.items() if t >= floor}
    rows = sorted(names, key=lambda name: -max(phases[m].get(name, 0.0) for m in modes))
    if CONTROL in modes:
        pairs = [(m, CONTROL) for m in modes if m not in ("off", CONTROL)]
    else:
        pairs = [(modes[-1], modes[-2])] if len(modes) >= 2 else []
    header = ["phase", *[f"{m} s" for m in modes], *[f"{m} - {base} s" for m, base in pairs]]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for name in rows:
        cells = [f"{phases[m].get(name, 0.0):.3f}" for m in modes]
        cells += [f"{phases[m].get(name, 0.0) - phases[base].get(name, 0.0):+.3f}" for m, base in pairs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def function_seconds(profiler, own: bool = False) -> dict[str, float]:
    """{``file:line(function)``: seconds} of a profiler: cumulative (recursion counted once, as pstats
    counts it), or with ``own`` the function's own time without its callees."""
    stats = pstats.Stats(profiler)
    column = 2 if own else 3
    return {f"{_short(f)}:{line}({name})": row[column] for (f, line, name), row in stats.stats.items()}


def _short(path: str) -> str:
    """A source file by its last two path parts (``flex/flex_attention.py``): short, and two packages'
    ``__init__.py`` stay apart."""
    return "/".join(path.replace(os.sep, "/").split("/")[-2:])


def extra_time(first: dict[str, float], second: dict[str, float], top: int = 30) -> list[tuple[str, float, float]]:
    """The functions by how much longer they took (cumulative) in ``second`` than in ``first``:
    [(function, first's seconds, second's seconds)], the largest extra first, only those with extra time."""
    rows = [(name, first.get(name, 0.0), seconds) for name, seconds in second.items()]
    rows = [r for r in rows if r[2] - r[1] > 0]
    rows.sort(key=lambda r: r[2] - r[1], reverse=True)
    return rows[:top]


def diff_text(first_mode: str, second_mode: str, first, second) -> str:
    """The functions ``second``'s profiler spent more time in than ``first``'s, by cumulative and by own time."""
    lines = []
    for own, top in ((False, 30), (True, 25)):
        kind = "own" if own else "cumulative"
        lines += ["", f"{kind} seconds, {second_mode} over {first_mode} (largest extra first)",
                  f"{'extra s':>9} {first_mode:>12} {second_mode:>12}  function"]
        rows = extra_time(function_seconds(first, own), function_seconds(second, own), top)
        lines += [f"{b - a:9.3f} {a:12.3f} {b:12.3f}  {name}" for name, a, b in rows]
    return "\n".join(lines[1:]) + "\n"


def compile_modes(torch, built, modes: list[str], profiled: set[str], sync, cudagraphs: bool) -> dict[str, dict]:
    """{mode: {"seconds", "graphs", "code", "profiler", "phases"}}: each mode compiled and called twice per batch
    size (the zoo's first call and its settling call, where CUDA graphs record), in order, in its plugin scope;
    ``profiler`` (a cProfile.Profile) for the modes in ``profiled``; ``phases``: its ``phase_delta``."""
    import ah_plugin
    from ah_plugin.inductor import compile_tools
    from ah_plugin.inductor.generated_code_capture import capturing_code
    from torchgen_ah.evaluation import e2e_models, one_process, own_kernel_caches, zoo_one_process
    from torchgen_ah.evaluation.generated_code import code_fingerprint

    batches = built.entry.batches or (built.entry.batch,)
    inputs = {batch: built.make_inputs(batch) for batch in batches}
    compile_tools.allow_recompiles(4 * len(modes) * len(batches))
    options = []
    for mode in modes:
        with zoo_one_process.plugin_scope(ah_plugin, mode):
            # every mode lowers and generates its code (with the whole-graph cache a control after off loaded
            # off's compiled graph: 0.3 s of off's 11 s on the CPU)
            options.append({**zoo_one_process.mode_options(mode, cudagraphs), **one_process.NO_GRAPH_CACHE})
    out = {}
    root = compile_tools.cache_folder()
    grad = torch.enable_grad() if built.train else torch.no_grad()
    with grad:
        for index, (mode, opts) in enumerate(zip(modes, one_process.distinct_options(options))):
            compile_tools.forget_dynamic_shapes()
            graphs = compile_tools.dynamo_graph_count()
            phases = compile_tools.phase_seconds()
            profiler = cProfile.Profile() if mode in profiled else None
            folder = own_kernel_caches.mode_folder(root, index, mode)  # its kernels compiled cold
            with own_kernel_caches.own_kernel_caches(folder), zoo_one_process.plugin_scope(ah_plugin, mode), \
                    capturing_code() as codes:
                compiled = torch.compile(built.model, options=opts)
                steps = [e2e_models.step_function(torch, built.model, compiled, args, built.train)
                         for args in inputs.values()]
                sync()
                seconds = 0.0
                for step in steps + steps:
                    seconds += _timed(step, profiler, sync)
            out[mode] = {"seconds": seconds, "graphs": compile_tools.dynamo_graph_count() - graphs,
                         "code": code_fingerprint(codes), "profiler": profiler,
                         "phases": phase_delta(phases, compile_tools.phase_seconds())}
            print(f"compile_profile: {mode} compiled in {seconds:.2f} s"
                  f"{' (under cProfile)' if profiler else ''}", flush=True)
    return out


def _timed(step, profiler, sync) -> float:
    import time

    start = time.perf_counter()
    if profiler is None:
        step()
    else:
        profiler.runcall(step)
    sync()
    return time.perf_counter() - start


def report(model: str, compiled: dict[str, dict], off_code: str | None) -> str:
    lines = [f"{model}: first calls of each mode, compiled in this order in one process", "",
             "| mode | compile s | profiled | Dynamo graphs | off's code |", "| --- | ---: | --- | ---: | --- |"]
    for mode, c in compiled.items():
        same = "-" if off_code is None else ("yes" if c["code"] == off_code else "no")
        lines.append(f"| {mode} | {c['seconds']:.2f} | {'yes' if c['profiler'] else 'no'} | {c['graphs']} | {same} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from ah_plugin.report import command_line
    from torchgen_ah.evaluation import compile_cost, zoo_models, zoo_one_process

    parser = command_line.parser(PROG, __doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a zoo entry (python -m torchgen_ah.evaluation.zoo --list)")
    parser.add_argument("--modes", default="off,off_again,fast", help="compiled in this order, in one process")
    parser.add_argument("--profile", default="off_again,fast",
                        help="the modes compiled under cProfile ('': none, for phase times without its cost)")
    parser.add_argument("--out", default=".", help="folder for the profiles and the diff")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--no-cudagraphs", action="store_true",
                        help="compile without CUDA graphs (the zoo compiles with them on a GPU, as here by default)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    profiled = [m.strip() for m in args.profile.split(",") if m.strip()]
    if args.model not in zoo_models.ENTRIES:
        parser.error(f"unknown model {args.model!r}; the zoo's: {', '.join(zoo_models.ENTRIES)}")
    unknown = [m for m in modes if m not in zoo_one_process.MODES]
    if unknown or len(set(modes)) != len(modes):
        parser.error(f"--modes: each once, of {', '.join(zoo_one_process.MODES)} (given: {args.modes})")
    if not set(profiled) <= set(modes):
        parser.error(f"--profile names modes not in --modes: {', '.join(sorted(set(profiled) - set(modes)))}")
    os.makedirs(args.out, exist_ok=True)
    caches = tempfile.mkdtemp(prefix="compile_profile_caches_", dir=args.out)  # fresh, as a fresh process's
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(caches, "triton")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        shutil.rmtree(caches, ignore_errors=True)
        return command_line.fail(PROG, RuntimeError("--device cuda needs a CUDA GPU (or pass --device cpu)"))
    try:
        from ah_plugin.inductor import compile_tools

        compile_tools.without_compile_caches()  # every mode autotunes for itself, as the zoo's judging does
        built = zoo_models.build(torch, args.model, args.device)
        sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
        cudagraphs = args.device == "cuda" and not args.no_cudagraphs
        compiled = compile_modes(torch, built, modes, set(profiled), sync, cudagraphs)
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    print(report(args.model, compiled, compiled["off"]["code"] if "off" in compiled else None))
    phases = phase_table({mode: c["phases"] for mode, c in compiled.items()})
    with open(os.path.join(args.out, f"{args.model}_phases.txt"), "w", encoding="utf-8") as handle:
        handle.write(f"{args.model}: seconds per compile phase (Dynamo's and Inductor's timers; nested phases "
                     f"overlap), modes in the order compiled\n\n{phases}")
    print(f"\nseconds per compile phase (Dynamo's and Inductor's timers; nested phases overlap)\n\n{phases}")
    for mode in profiled:
        path = os.path.join(args.out, f"{args.model}_{mode}.txt")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(compile_cost.profile_text(compiled[mode]["profiler"],
                                                   header=f"{args.model} {mode}: {compiled[mode]['seconds']:.2f} s\n"))
    if len(profiled) >= 2:
        first, second = profiled[-2], profiled[-1]
        text = diff_text(first, second, compiled[first]["profiler"], compiled[second]["profiler"])
        with open(os.path.join(args.out, f"{args.model}_diff.txt"), "w", encoding="utf-8") as handle:
            handle.write(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
