"""Several compiles of one model in one process, their steps timed in interleaved windows: what
``benchmarks/step_ab.py`` and the zoo's step judging (``zoo_one_process``) share.

Fresh processes running the same compiled code step 2-20% apart on an H200 (where each process's memory and
clocks land), but 0.1-0.3% apart in one process with their windows interleaved. So a step ratio of a percent
is judged in one process: every mode compiled there, then rounds of one window per mode, the order rotating
each round, so drift hits all alike. Two ``torch.compile`` calls whose mode and options compare equal share
one Dynamo cache entry (the second runs the first's code): ``distinct_options`` adds Inductor options set to
their current value (``NEUTRAL_KEYS``) until each compile's options differ from every earlier one's.
"""

from __future__ import annotations

import statistics
import sys

# Inductor's cache of whole compiled graphs, off for every compile of a shared process: its key leaves out the
# neutral options, so a control compiled after off (the same graph, options differing only there) loaded off's
# compiled graph, in about a tenth of off's seconds, and no compile time of a mode could be compared with it
NO_GRAPH_CACHE = {"fx_graph_cache": False}
# Inductor options that change nothing when set to their current value
NEUTRAL_KEYS = ("trace.enabled", "verbose_progress", "debug_index_asserts", "comment_origin",
                "profiler_mark_wrapper_call")


def neutral_options(count: int) -> dict:
    """The first ``count`` of ``NEUTRAL_KEYS`` at their current values (a compile's options made unequal)."""
    from ah_plugin.inductor import compile_tools

    if count > len(NEUTRAL_KEYS):
        raise ValueError(f"at most {len(NEUTRAL_KEYS)} neutral options, {count} asked")
    return compile_tools.option_values(*NEUTRAL_KEYS[:count])


def distinct_options(options: list[dict]) -> list[dict]:
    """``options`` in order, each one equal to an earlier one given neutral keys until it is not: every
    compile then gets a Dynamo cache entry of its own."""
    out: list[dict] = []
    for given in options:
        made, extra = dict(given), 0
        while made in out:
            extra += 1
            made = {**given, **neutral_options(extra)}
        out.append(made)
    return out


def recompiled(graphs_before: int, during: str, prog: str) -> bool:
    """True (and says so on stderr) when Dynamo captured a graph since ``graphs_before``: a compile called
    outside its plugin scope would then run code compiled without it."""
    from ah_plugin.inductor import compile_tools

    if compile_tools.dynamo_graph_count() == graphs_before:
        return False
    print(f"{prog}: a compile recompiled during {during} (outside its plugin scope); the step times would "
          "not be its mode's", file=sys.stderr)
    return True


def interleaved_windows(step_fns: dict, windows: int, sync, per_window: int) -> dict:
    """{name: [seconds per step of each window]}: rounds of one window (``per_window`` steps) per name,
    the order rotating each round."""
    from torchgen_ah.evaluation.e2e_models import window_times

    names = list(step_fns)
    out = {n: [] for n in names}
    for r in range(windows):
        for name in names[r % len(names):] + names[: r % len(names)]:
            out[name] += window_times(step_fns[name], sync, 1, per_window)
    return out


def step_ratio(windows: dict, mode: str, base: str) -> dict:
    """``mode``'s step against ``base``'s from one process's windows ({batch: {mode: [window times]}}, the
    same number of rounds for every mode of a batch): ``ratio``, the geometric mean over batches of the
    medians' ratio; ``low`` and ``high``, the range of the per-round ratios (each round's window of
    ``mode`` over ``base``'s, geometric mean over batches): how far one round's comparison moves."""
    from torchgen_ah.data.aggregate import geomean  # numpy: the report's side only

    batches = list(windows)
    ratio = geomean(statistics.median(windows[b][mode]) / statistics.median(windows[b][base]) for b in batches)
    rounds = min(len(windows[b][mode]) for b in batches)
    per_round = [geomean(windows[b][mode][i] / windows[b][base][i] for b in batches) for i in range(rounds)]
    return {"ratio": ratio, "low": min(per_round), "high": max(per_round)}
