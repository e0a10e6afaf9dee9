"""Cost of the results cache against the size of its file: 1e3, 1e5 and 1e6 rows.

    python benchmarks/results_cache_scale.py [--rows 1000,100000,1000000] [--repeats 5] [--no-write]

For each size, a results file with this process's validators and that many rows of other shapes (plus
the program's own rows for the hit runs), then, each in a fresh Python:

- load: what a run does first, `store().ensure_loaded()` and the cache key's digest (a large plain file is
  opened for search, docs/tunable.md), and for reference a full read (`read_results`, what a rewrite or
  `get_results()` costs); seconds and the memory each adds;
- hit: a small program (two frozen linear layers compiled with max-autotune on the CPU, checked against
  eager) whose shapes are in the file: nothing is benchmarked;
- miss: the same program against a file without its shapes: both are tuned and appended.

Runs take turns across sizes (one of each size, then again), so load from other work on the machine falls
on every size alike; the table gives medians of wall and CPU seconds and the peak memory of the process.
Inductor's C++ build cache is shared and warm (its FX graph and autotune caches off), so a run is the
import, the tracing, the lowering and the cache's own work. Bars (issue 41): a million-row file loads in
under 2 s, and a hit run stays within 10% of the 1e3 file's. Writes its section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from torchgen_ah.evaluation.results_section import publish

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
SECTION = "results-cache-scale"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent(
    """
    import json, resource, sys, time
    import torch
    from ah_plugin.inductor import compile_tools
    compile_tools.freeze_constant_weights()
    compile_tools.without_compile_caches()  # every run lowers and asks the cache

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(64, 96))
            self.w2 = torch.nn.Parameter(torch.randn(96, 40))
        def forward(self, x):
            return torch.relu(x @ self.w1) @ self.w2

    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(24, 64)
    with torch.no_grad():
        y = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False)(x)
        ok = bool(torch.allclose(y, model(x), atol=1e-4, rtol=1e-4))
    import ah_plugin.tunable as tunable
    print(json.dumps({"ok": ok, "stats": tunable.get_stats(),
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """
)

LOAD = textwrap.dedent(
    """
    import gc, json, resource, sys, time
    from ah_plugin.tunable import results_file as F
    from ah_plugin.tunable.store import store
    validators = F.current_validators()  # imports torch: not the cache's cost
    gc.collect()

    def peak_mb():  # the peak resident size since the last reset (Linux), else since the start
        try:
            with open("/proc/self/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
        except (OSError, StopIteration):
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def resident_mb():
        try:
            with open("/proc/self/statm") as statm:
                return int(statm.read().split()[1]) * resource.getpagesize() / 2 ** 20
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # the peak starts again from here: torch's import is not the cache's
    except OSError:
        pass
    base = resident_mb()
    search_s = 0.0
    if sys.argv[2] == "open":
        start, cpu = time.perf_counter(), time.process_time()
        store().ensure_loaded()
        store().digest()
        loaded, loaded_cpu = time.perf_counter(), time.process_time()
        store().exact(("packed_linear", "NN_7_7_7_ld_7_7_float32"))  # a shape the file does not hold
        search_s = time.process_time() - loaded_cpu
        start, cpu = start + time.perf_counter() - loaded, cpu + time.process_time() - loaded_cpu
    else:
        start, cpu = time.perf_counter(), time.process_time()
        assert not F.read_results(sys.argv[1], validators).rejected
    print(json.dumps({"s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu, "search_s": search_s,
                      "searched": store().searched is not None,
                      "mb": peak_mb() - base}))
    """
)


def _environment(results: str, inductor_cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AH_", "TORCHINDUCTOR_"))}
    env.update(PYTHONPATH=REPO, AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=results, OMP_NUM_THREADS="1",
               TORCHINDUCTOR_CACHE_DIR=inductor_cache, TORCHINDUCTOR_COMPILE_THREADS="1")
    return env


def _run(argv: list[str], env: dict) -> tuple[dict, float, float]:
    """(the child's JSON line, wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:2]} failed:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall, cpu


def _rows(count: int, seed: int) -> list[str]:
    """`count` rows of shapes the program never compiles (M from 1000 up), solutions as Inductor names them."""
    rng = random.Random(seed)
    solutions = ["extern__mkl_linear", "cpp_CppMicroGemmFP32Vec_bm8_bn32_bk1", "cpp_CppMicroGemmFP32Vec_bm4_bn24_bk1"]
    rows = []
    for i in range(count):
        n, k = 8 * (1 + i % 64), 16 * (1 + i % 32)
        rows.append(f"packed_linear,NN_{1000 + i}_{n}_{k}_ld_{k}_{n}_float32,{solutions[i % 3]},"
                    f"{rng.uniform(0.001, 2.0):.6g}")
    return rows


def _write(path: str, header: str, rows: list[str], own: list[str]) -> None:
    """The file: validators, then the rows with the program's own rows (if any) in the middle."""
    middle = len(rows) // 2
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(header)
        handle.write("\n".join(rows[:middle] + own + rows[middle:]) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000,100000,1000000", help="file sizes in rows, comma-separated")
    parser.add_argument("--repeats", type=int, default=5, help="hit and miss runs per size (medians reported)")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    sizes = [int(text) for text in args.rows.split(",")]
    from ah_plugin.tunable import results_file as F

    work = tempfile.mkdtemp(prefix="results_cache_scale.")
    try:
        inductor_cache = os.path.join(work, "inductor")
        header = F.format_results(F.current_validators(), {})
        # the program's own rows: one run on an empty file records them (and warms the C++ build cache)
        first = os.path.join(work, "program.csv")
        done, _, _ = _run(["-c", PROGRAM], _environment(first, inductor_cache))
        assert done["ok"] and done["stats"]["tuned"] >= 2, done
        own = [line for line in open(first, encoding="utf-8").read().splitlines()
               if line and not line.startswith("Validator")]
        files = {}
        for size in sizes:
            rows = _rows(size, seed=size)
            files[size] = {kind: os.path.join(work, f"{kind}_{size}.csv") for kind in ("hit", "miss")}
            _write(files[size]["hit"], header, rows, own)
            _write(files[size]["miss"], header, rows, [])
        figures = {size: {"hit": [], "miss": [], "hit_cpu": [], "miss_cpu": [], "rss": []} for size in sizes}
        for size in sizes:
            env = _environment(files[size]["hit"], inductor_cache)
            figures[size]["open"], _, _ = _run(["-c", LOAD, files[size]["hit"], "open"], env)
            figures[size]["read"], _, _ = _run(["-c", LOAD, files[size]["hit"], "read"], env)
        for _ in range(args.repeats):
            for size in sizes:
                for kind in ("hit", "miss"):
                    target = os.path.join(work, f"run_{kind}.csv")
                    shutil.copyfile(files[size][kind], target)  # a miss run appends: each starts alike
                    out, wall, cpu = _run(["-c", PROGRAM], _environment(target, inductor_cache))
                    stats = out["stats"]
                    assert out["ok"], out
                    assert (stats["hits"] >= 2 and stats["tuned"] == 0) if kind == "hit" else stats["tuned"] >= 2, out
                    figures[size][kind].append(wall)
                    figures[size][f"{kind}_cpu"].append(cpu)
                    if kind == "hit":
                        figures[size]["rss"].append(out["maxrss_mb"])
        body = _report(sizes, files, figures, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return publish(RESULTS, SECTION, body, write=not args.no_write)


def _report(sizes, files, figures, repeats) -> str:
    base = sizes[0]
    median = {size: {key: statistics.median(values) for key, values in f.items() if isinstance(values, list)}
              for size, f in figures.items()}
    lines = [
        "## Results cache: cost against the file's size",
        "",
        f"`python benchmarks/results_cache_scale.py` on {platform.machine()} with {os.cpu_count()} cores "
        f"(Python {platform.python_version()}); medians of {repeats} runs per size, taken in turns across sizes. "
        "The program: two frozen linear layers (24x64x96, 24x96x40) compiled with `max-autotune-no-cudagraphs` "
        "on the CPU and checked against eager, Inductor's C++ build cache warm, its FX graph and autotune "
        "caches off. Load: `ensure_loaded()` and the digest in a fresh Python (torch already imported); full "
        "read: `read_results` of the whole file (a rewrite, `get_results()`). Memory: what each adds to the "
        "process; hit-run peak: the whole process.",
        "",
        "| rows | file MB | load s (CPU s) | load +MB | full read s (CPU s) | full read +MB | hit run s (CPU s) "
        "| hit vs 1e3, wall (CPU) | miss run s (CPU s) | miss vs 1e3, wall (CPU) | hit-run peak MB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in sizes:
        f, m = figures[size], median[size]
        mb = os.path.getsize(files[size]["hit"]) / 1e6
        lines.append(
            f"| {size:,} | {mb:.1f} | {f['open']['s']:.3f} ({f['open']['cpu_s']:.3f}) | {f['open']['mb']:.0f} "
            f"| {f['read']['s']:.2f} ({f['read']['cpu_s']:.2f}) | {f['read']['mb']:.0f} "
            f"| {m['hit']:.2f} ({m['hit_cpu']:.2f}) | {_ratio(m, median[base], 'hit')} "
            f"| {m['miss']:.2f} ({m['miss_cpu']:.2f}) | {_ratio(m, median[base], 'miss')} | {m['rss']:.0f} |")
    top = sizes[-1]
    cpu_ratio = median[top]["hit_cpu"] / median[base]["hit_cpu"]
    lines += [
        "",
        f"Bars: load of the {top:,}-row file {figures[top]['open']['s']:.2f} s (under 2 s: "
        f"{'met' if figures[top]['open']['s'] < 2 else 'missed'}); its hit run {cpu_ratio:.3f}x the {base:,}-row "
        f"file's in CPU seconds (within 1.10: {'met' if cpu_ratio <= 1.10 else 'missed'}), "
        f"{median[top]['hit'] / median[base]['hit']:.3f}x in wall seconds. The CPU figure is the bar: wall seconds "
        "also carry whatever else the machine runs. Whole runs differ by several percent from one to the next "
        f"on this machine; the cache's own work at load, {figures[top]['open']['cpu_s']:.2f} CPU s for the "
        f"{top:,}-row file, is {100 * figures[top]['open']['cpu_s'] / median[base]['hit_cpu']:.1f}% of the "
        f"{base:,}-row file's hit run, and each shape looked up costs one search of the file "
        f"({1000 * figures[top]['open']['search_s']:.0f} CPU ms). The "
        f"{top:,}-row file is {'searched per shape' if figures[top]['open'].get('searched') else 'read whole'} "
        "at load.",
    ]
    return "\n".join(lines)


def _ratio(figures: dict, base: dict, kind: str) -> str:
    return f"{figures[kind] / base[kind]:.3f} ({figures[kind + '_cpu'] / base[kind + '_cpu']:.3f})"


if __name__ == "__main__":
    sys.exit(main())
