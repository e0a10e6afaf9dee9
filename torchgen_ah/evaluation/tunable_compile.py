"""Compile time of a small real model with a warm results file vs max-autotune off vs default max-autotune.

Every run is a fresh process timing the first call of `torch.compile(model)` (a 2-layer BERT encoder from
`transformers` with random weights, bf16, batch 8 x 128 tokens; an MLP stand-in when `transformers` is
missing or `--model mlp|tiny` asks for it). On the CPU, freezing is on in every run, so that linears are
lowered as `packed_linear`, the GEMM Inductor autotunes on the CPU, and have GEMM choices.

Runs (`off` is shared; the other three come in two variants):

- `off`: `torch.compile(model)`: aten GEMMs, no autotuning.
- `default`: autotuning with the plugin off.
- `tune`: `AH_TUNABLE_ENABLED=1`: every GEMM shape is autotuned once, its winner written at exit.
- `hit`: `AH_TUNABLE_ENABLED=1 AH_TUNABLE_TUNING=0` on a copy of the file the cold `tune` run wrote.

Variants: **max-autotune mode** (`mode="max-autotune-no-cudagraphs"`, which also autotunes pointwise and
reduction configs at first call and switches coordinate descent on) and **GEMM autotuning only**
(`options={"max_autotune_gemm": True}`: only GEMM choices are autotuned).

Two phases per run:

- **cold**: its own empty Inductor and Triton cache directory.
- **warm kernel cache**: a second fresh process on the directory of its own cold run (the `hit` run
  keeps the cold `hit` run's, not the tuning run's), with the FX graph cache, the AOTAutograd cache and
  Inductor's autotune-results cache off: Inductor really lowers the graph again and a cache hit really
  takes its recorded winner, but kernels already compiled on this machine are not compiled again. This
  is the steady state of a user re-running `serve.py`. The warm `tune` run writes a new results file.

Counted per run: the GEMM autotunings Inductor benchmarked and their choices (a feedback saver), the
non-GEMM autotunings (Triton pointwise/reduction config benchmarks and coordinate-descent searches), and
the cache's choices (verbose level 2). The bar, printed per variant and phase: cache-hit
compile within 10% of max-autotune off, zero GEMM benchmarks, no more non-GEMM autotunings than off (on
the GPU off too benchmarks a few reduction configs at first call), the same kernels as the tuning run chose.

Run order: first what the bar needs (off, `tune` and `hit` cold, then off and `hit` warm), then the
warm repeats of off and the hits, then the profile runs, then the informational runs (`default`, warm
`tune`). A time budget skips each run the remaining budget cannot hold. `benchmarks/tunable_compile.py` is
the command line.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import textwrap
import time

from torchgen_ah.evaluation.compile_cost import profile_text

SECTION = "tunable_compile"
BAR_RATIO = 1.10

CHILD = textwrap.dedent(
    """
    import json, sys, time, torch
    import ah_plugin
    from ah_plugin.inductor import compile_tools
    ah_plugin.require_active_from_environment()  # the run's results-cache settings, entry point or not
    spec = json.loads(sys.argv[1])
    device, model_kind = spec["device"], spec["model"]
    if spec["warm"]:  # keep compiled kernels only: lower again, benchmark again (no recorded timings)
        compile_tools.without_compile_caches()
    if device == "cpu":
        compile_tools.freeze_constant_weights()  # linears become packed_linear with GEMM choices
    benchmarked = []
    compile_tools.on_benchmarked(lambda name, count: benchmarked.append([name, count]))
    other = {"config_benchmarks": 0, "coordinate_descent": 0}
    try:
        compile_tools.count_config_tuning(other)
    except ImportError:  # no Triton: nothing to count
        pass
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    model = None
    if model_kind in ("auto", "bert"):
        try:
            from transformers import BertConfig, BertModel
            cfg = BertConfig(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072)
            model = BertModel(cfg).to(device=device, dtype=dtype).eval()
            inputs = (torch.randint(0, cfg.vocab_size, (8, 128), device=device),)
            name = "BERT-base, 2 layers, %s, 8x128" % str(dtype).replace("torch.", "")
        except ImportError:
            if model_kind == "bert":
                raise
    if model is None:
        hidden, inner, rows = (128, 256, 32) if model_kind == "tiny" else (768, 3072, 1024)
        model = torch.nn.Sequential(torch.nn.Linear(hidden, inner), torch.nn.GELU(), torch.nn.Linear(inner, hidden))
        model = model.to(device=device, dtype=dtype).eval()
        inputs = (torch.randn(rows, hidden, device=device, dtype=dtype),)
        name = "MLP %d-%d-%d, %d rows, %s" % (hidden, inner, hidden, rows, str(dtype).replace("torch.", ""))
    with torch.no_grad():
        model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        kwargs = {
            "off": {},
            "mode": {"mode": "max-autotune-no-cudagraphs"},
            "gemm": {"options": {"max_autotune_gemm": True}},
        }[spec["variant"]]
        compiled = torch.compile(model, **kwargs)
        start = time.perf_counter()
        compiled(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    stats = {}
    if spec["mode"] in ("tune", "hit"):
        import ah_plugin.tunable as tunable
        stats = tunable.get_stats()
    print("RESULT " + json.dumps({"model": name, "seconds": seconds, "benchmarked": benchmarked,
                                  "other": other, "stats": stats}))
    """
)

VARIANTS = {"mode": "max-autotune mode", "gemm": "GEMM autotuning only"}
MODE_LABELS = {"default": "default autotuning", "tune": "tuning run (cache on)", "hit": "cache hit (tuning off)"}
# Table order: off, then each variant's default / tune / hit.
KEYS = ["off"] + [f"{variant}_{mode}" for variant in VARIANTS for mode in ("default", "tune", "hit")]
# Informational runs, per variant, after everything the bar needs (a warm phase needs its cold phase).
INFO_STEPS = [("default", "cold"), ("tune", "warm"), ("default", "warm")]


def plan(variants: list[str], warm_repeats: int = 1, profile: str | None = None) -> list[tuple[str, str, str]]:
    """The ordered (key, phase, kind) steps, kind "run", "repeat" or "profile". Under a budget the bar's
    runs come first (off, tune and hit cold, then off and hit warm; the first variant named first), then the
    extra warm runs of off and the hits, interleaved, since one warm sample is noisy (+-20%), then the
    profiles; the informational runs (default, warm tune) get what is left."""
    bar = [("off", "cold")]
    for variant in variants:
        bar += [(f"{variant}_tune", "cold"), (f"{variant}_hit", "cold"), ("off", "warm"), (f"{variant}_hit", "warm")]
    steps = [(key, phase, "run") for key, phase in dict.fromkeys(bar)]  # off warm once
    repeated = ["off"] + [f"{variant}_hit" for variant in variants]
    steps += [(key, "warm", "repeat") for _ in range(warm_repeats - 1) for key in repeated]
    if profile:
        wanted = None if profile == "all" else set(profile.split(","))
        steps += [(key, "warm", "profile") for key in repeated if wanted is None or key in wanted]
    return steps + [(f"{variant}_{mode}", phase, "run") for variant in variants for mode, phase in INFO_STEPS]


def split_key(key: str) -> tuple[str, str]:
    """`mode_hit` -> ("mode", "hit"); `off` -> ("off", "off")."""
    return ("off", "off") if key == "off" else tuple(key.split("_", 1))  # type: ignore[return-value]


def copy_results(src_dir: str, src_prefix: str, dst_dir: str, dst_prefix: str) -> int:
    """Copy the tuning run's results file(s) (`<prefix><ordinal>.csv`) for a hit run; returns how many."""
    copied = 0
    for path in glob.glob(os.path.join(src_dir, src_prefix + "[0-9]*.csv")):
        suffix = os.path.basename(path)[len(src_prefix):]
        shutil.copyfile(path, os.path.join(dst_dir, dst_prefix + suffix))
        copied += 1
    return copied


def run(key: str, phase: str, device: str, model: str, out_dir: str, profile: bool = False) -> dict:
    """One fresh process; its Inductor/Triton caches live in `<out_dir>/<key>/inductor` (kept for warm).
    `profile`: the child runs under cProfile and `<key>/profile_<phase>.txt` gets where its time went
    (main thread; kernel compiles in worker processes show up as waits). Profiled timings are not used."""
    variant, mode = split_key(key)
    run_dir = os.path.join(out_dir, key)
    os.makedirs(run_dir, exist_ok=True)
    cache_dir = os.path.join(run_dir, "inductor")
    if phase == "cold" and os.path.exists(cache_dir):
        shutil.rmtree(cache_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AH_", "TORCHINDUCTOR_", "TRITON_CACHE"))}
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    if phase == "warm":
        env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    verbose_file = os.path.join(run_dir, f"verbose_{phase}.txt")
    if os.path.exists(verbose_file):
        os.remove(verbose_file)
    if mode in ("tune", "hit"):
        prefix = f"results_{phase}"
        for stale in glob.glob(os.path.join(run_dir, prefix + "*")):
            os.remove(stale)
        if mode == "hit":  # the file the cold tuning run of this variant wrote, untouched
            if not copy_results(os.path.join(out_dir, f"{variant}_tune"), "results_cold", run_dir, prefix):
                raise SystemExit(f"{key}: the {variant}_tune cold run wrote no results file")
        env.update(AH_TUNABLE_ENABLED="1", AH_TUNABLE_FILENAME=os.path.join(run_dir, prefix + "%d.csv"),
                   AH_TUNABLE_VERBOSE="2", AH_TUNABLE_VERBOSE_FILENAME=verbose_file)
        env["AH_TUNABLE_TUNING"] = "1" if mode == "tune" else "0"
    spec = {"variant": variant, "mode": mode, "device": device, "model": model, "warm": phase == "warm"}
    command = [sys.executable, "-c", CHILD, json.dumps(spec)]
    if profile:
        child_path, stats_path = os.path.join(run_dir, "child.py"), os.path.join(run_dir, f"profile_{phase}.prof")
        with open(child_path, "w") as handle:
            handle.write(CHILD)
        command = [sys.executable, "-m", "cProfile", "-o", stats_path, child_path, json.dumps(spec)]
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{key} ({phase}) failed:\n{proc.stderr[-4000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    result["wall"] = time.perf_counter() - started
    if profile:
        write_profile_text(stats_path, os.path.join(run_dir, f"profile_{phase}.txt"))
    result["choices"] = {}
    if os.path.exists(verbose_file):
        for text in open(verbose_file):
            match = re.search(r"(?:tuned|hit) (\S+?,\S+) -> (\S+)", text)
            if match:
                result["choices"][match.group(1)] = match.group(2)
    return result


def write_profile_text(stats_path: str, text_path: str) -> None:
    """The top functions by cumulative and by own time of a cProfile dump, as text."""
    with open(text_path, "w") as handle:
        handle.write(profile_text(stats_path, cumulative=120, own=30))


def median_of_repeats(result: dict, extra: list[dict]) -> dict:
    """`result` with its seconds replaced by the median over it and the `extra` runs of the same key
    (all values kept in `seconds_all`)."""
    runs = [result] + extra
    merged = dict(result, seconds=statistics.median(r["seconds"] for r in runs))
    merged["seconds_all"] = [r["seconds"] for r in runs]
    return merged


def estimate(key: str, phase: str, results: dict) -> float:
    """Expected wall seconds of a run: its cold phase, else the same mode's other variant, else the mean."""
    walls = [r["wall"] for phases in results.values() for r in phases.values()]
    if key in results and "cold" in results[key]:
        return results[key]["cold"]["wall"]
    mode = split_key(key)[1]
    same_mode = [r["wall"] for k, phases in results.items() if split_key(k)[1] == mode for r in phases.values()]
    if same_mode:
        return max(same_mode)
    return sum(walls) / len(walls) if walls else 0.0


def ready(key: str, phase: str, kind: str, results: dict) -> bool:
    """Whether a step's prerequisites were measured: a warm run needs its cold run, a hit the cold tuning
    run of its variant (its results file), a repeat or profile the warm run it repeats."""
    done = results.get(key, {})
    if kind != "run":
        return "warm" in done
    if phase == "warm" and "cold" not in done:
        return False
    return not key.endswith("_hit") or "cold" in results.get(key.replace("_hit", "_tune"), {})


def cost(key: str, phase: str, kind: str, results: dict) -> float:
    """Expected wall seconds of a step (a profiled run is slower)."""
    if kind == "run":
        return estimate(key, phase, results)
    return results[key]["warm"]["wall"] * (1.5 if kind == "profile" else 1.0)


def run_all(args: argparse.Namespace, checkpoint=None) -> tuple[dict, list]:
    """Run the steps of `plan` in order within the budget; returns {key: {phase: result}} and the skipped
    runs. A repeated warm run reports the median over its first run and its repeats. `checkpoint(results,
    skipped)` is called after every measured run, so a run killed from outside still leaves what it measured."""
    results: dict = {}
    skipped = []
    first: dict = {}  # key -> its first warm result (results[key]["warm"] becomes the median)
    extra: dict = {}  # key -> its repeated warm results
    start = time.perf_counter()
    budget = args.max_minutes * 60 if args.max_minutes else None

    def fits(seconds: float) -> bool:
        return budget is None or time.perf_counter() - start + seconds <= budget

    for key, phase, kind in plan(args.variants, args.warm_repeats, args.profile):
        if not ready(key, phase, kind, results) or (results and not fits(cost(key, phase, kind, results))):
            if kind == "run":
                skipped.append((key, phase))
            elif kind == "profile":
                print(f"[profile] {key} (warm): skipped, budget spent or not measured", file=sys.stderr, flush=True)
            continue
        if kind == "profile":  # after the measurements: where the warm off and hit runs spend their time
            print(f"[profile] {key} (warm)", file=sys.stderr, flush=True)
            run(key, "warm", args.device, args.model, args.out_dir, profile=True)
            continue
        label = phase if kind == "run" else "warm, repeat"
        print(f"[{time.perf_counter() - start:6.1f}s] {key} ({label})", file=sys.stderr, flush=True)
        result = run(key, phase, args.device, args.model, args.out_dir)
        if kind == "run":
            results.setdefault(key, {})[phase] = result
        else:
            first.setdefault(key, results[key]["warm"])
            extra.setdefault(key, []).append(result)
            results[key]["warm"] = median_of_repeats(first[key], extra[key])
        if checkpoint:
            checkpoint(results, skipped)
    return results, skipped


def cell(result: dict | None, fmt) -> str:
    return fmt(result) if result else "-"


def bar_lines(results: dict) -> list[str]:
    """Per variant and phase: hit vs off ratio, zero benchmarks, same kernels as the cold tuning run."""
    lines = []
    for variant, label in VARIANTS.items():
        tune = results.get(f"{variant}_tune", {}).get("cold")
        for phase, phase_label in (("cold", "cold caches"), ("warm", "warm kernel cache")):
            off = results.get("off", {}).get(phase)
            hit = results.get(f"{variant}_hit", {}).get(phase)
            if not (off and hit and tune):
                lines.append(f"- {label}, {phase_label}: not measured (skipped).")
                continue
            ratio = hit["seconds"] / off["seconds"]
            gemm_benchmarks = sum(n for _, n in hit["benchmarked"])
            # Inductor benchmarks some reduction configs at first call even with max-autotune off, so the
            # hit may do as many non-GEMM autotunings as off, not more (zero would fail off itself).
            other, off_other = sum(hit["other"].values()), sum(off["other"].values())
            same = hit["choices"] == tune["choices"] and bool(tune["choices"])
            ok = ratio <= BAR_RATIO and gemm_benchmarks == 0 and other <= off_other and same
            lines.append(
                f"- {label}, {phase_label}: hit {hit['seconds']:.1f} s vs off {off['seconds']:.1f} s = "
                f"**{ratio:.2f}x** (bar <= {BAR_RATIO:.2f}x); GEMM choices benchmarked: {gemm_benchmarks}; "
                f"non-GEMM autotunings: {other} (off: {off_other}); same kernels as the tuning run: {same} "
                f"({len(hit['choices'])} of {len(tune['choices'])} shapes) -> **{'PASS' if ok else 'FAIL'}**"
            )
    return lines


def render(results: dict, skipped: list, args: argparse.Namespace) -> str:
    command = f"python benchmarks/tunable_compile.py --out-dir /tmp/tc --device {args.device}"
    if args.model != "auto":
        command += f" --model {args.model}"
    if args.max_minutes:
        command += f" --max-minutes {args.max_minutes:g}"
    if args.warm_repeats > 1:
        command += f" --warm-repeats {args.warm_repeats}"
    if args.variants != list(VARIANTS):
        command += f" --variants {','.join(args.variants)}"
    model = next(r["model"] for phases in results.values() for r in phases.values())
    lines = [
        f"Model: {model} on {args.device}. Command: `{command}`",
        "",
        "Each cell is one fresh process timing the first call. *cold*: empty Inductor/Triton caches. "
        "*warm*: the same run again on its own cold run's kernel cache, with the FX graph, AOTAutograd and "
        "autotune-results caches off (Inductor lowers again; nothing already compiled is compiled again). "
        "Counts are `cold / warm`.",
        "",
        "| variant | run | cold compile (s) | vs off | warm compile (s) | vs off | GEMM autotunings benchmarked "
        "| GEMM choices benchmarked | non-GEMM autotunings | cache stats |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    off = results["off"]
    for key in KEYS:
        if key not in results:
            continue
        variant, mode = split_key(key)
        phases = results[key]
        cold, warm = phases.get("cold"), phases.get("warm")

        def ratio(r: dict | None, phase: str) -> str:
            base = off.get(phase)
            return f"{r['seconds'] / base['seconds']:.2f}x" if r and base else "-"

        def counts(fmt) -> str:
            return f"{cell(cold, fmt)} / {cell(warm, fmt)}"

        stats = "; ".join(
            f"{phase}: {nonzero}" for phase, r in (("cold", cold), ("warm", warm))
            if r and (nonzero := {k: v for k, v in r["stats"].items() if v})
        )
        lines.append(
            f"| {'-' if key == 'off' else VARIANTS[variant]} | {'max-autotune off' if key == 'off' else MODE_LABELS[mode]} "
            f"| {cell(cold, lambda r: format(r['seconds'], '.1f'))} "
            f"| {ratio(cold, 'cold')} | {cell(warm, lambda r: format(r['seconds'], '.1f'))} | {ratio(warm, 'warm')} "
            f"| {counts(lambda r: str(len(r['benchmarked'])))} "
            f"| {counts(lambda r: str(sum(n for _, n in r['benchmarked'])))} "
            f"| {counts(lambda r: str(sum(r['other'].values())))} | {stats} |"
        )
    repeated = [(key, phases["warm"]["seconds_all"]) for key, phases in results.items()
                if "seconds_all" in phases.get("warm", {})]
    if repeated:
        lines += ["", "Warm runs repeated (median reported): " + "; ".join(
            f"{key}: {', '.join(f'{v:.2f}' for v in values)} s" for key, values in repeated) + "."]
    if skipped:
        lines += ["", "Skipped (budget or a missing prerequisite): "
                  + ", ".join(f"{key} ({phase})" for key, phase in skipped) + "."]
    lines += ["", "Bar (issue 4): cache-hit compile within 10% of max-autotune off, with zero GEMM benchmarks, "
              "no more non-GEMM autotunings than off, and the same kernels as the tuning run chose:", ""]
    lines += bar_lines(results)
    lines += [
        "",
        "**The like-for-like comparison is *GEMM autotuning only, warm kernel cache*.** Max-autotune off "
        "calls aten for every GEMM and compiles no GEMM kernel; on the GPU it still benchmarks a few reduction "
        "configs at first call (the non-GEMM column), as the hit does. The cache answers only GEMM choices. "
        "`mode=\"max-autotune-no-cudagraphs\"` also benchmarks pointwise and reduction configs and runs "
        "coordinate descent at first call (more in the non-GEMM column), which no GEMM "
        "results file can remove, so the GEMM-only variant leaves that out. A cold hit must still compile "
        "the winning Triton templates once per machine (off has none to compile); with a warm kernel cache "
        "both off and hit reuse what this machine already compiled, so what is left is what the cache "
        "itself costs: the lookup, and generating and loading the recorded winner's kernel instead of calling aten. "
        "(On the CPU path there is no Triton: the non-GEMM column is 0 and the winners are C++ templates.)",
    ]
    return "\n".join(lines)

