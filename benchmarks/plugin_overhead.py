"""Plugin overhead: (1) feature extraction + ranking per mm lowering, (2) ``import torch`` with the
plugin installed and switched off vs. entry points off (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``), and switched
on (``TORCHINDUCTOR_AUTOHEURISTIC_USE=mm``: bar, within 0.2 s of switched off; its hooks go into Inductor
when torch imports it, not at ``import torch``).

    python benchmarks/plugin_overhead.py [--runs 10] [--no-write]

Prints a markdown table and rewrites the ``plugin_overhead`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

from ah_plugin.collect import features
from ah_plugin.use import ranking
from torchgen_ah.evaluation.results_section import publish

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "RESULTS.md")
ARTIFACT = os.path.join(REPO, "artifacts", "_MMRankingH100.py")
SHAPES = [(8192, 1024, 256), (1024, 1024, 1024), (4096, 4096, 512), (128, 8192, 4096)]
USE_BAR_S = 0.2  # switched on (USE=mm) against switched off: import torch's median may differ by this much


def _desc(size, stride):
    return {"size": list(size), "stride": list(stride), "dtype": "torch.bfloat16"}


def _load_artifact():
    if not os.path.exists(ARTIFACT):
        return None
    spec = importlib.util.spec_from_file_location("_ah_bench_artifact", ARTIFACT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MMRankingH100()


def per_lowering(repeats: int = 2000):
    """Median microseconds of features (and features + ranking) per mm lowering."""
    artifact = _load_artifact()
    options = ranking.UseOptions(top_k=10)
    candidates = list(artifact.choices)[:24] if artifact is not None else []
    feat_us, total_us = [], []
    for i in range(repeats):
        m, k, n = SHAPES[i % len(SHAPES)]
        tensors = [_desc((m, k), (k, 1)), _desc((k, n), (n, 1))]
        t0 = time.perf_counter()
        feats, num, cat = features.op_features("mm", tensors, False)
        row = features.ordered_features(feats, num, cat)
        features.metadata("mm", num, cat, (9, 0), 232448, "NVIDIA H200")
        t1 = time.perf_counter()
        if artifact is not None:
            ranking.choose(artifact.rank(row), candidates, options)
        t2 = time.perf_counter()
        feat_us.append((t1 - t0) * 1e6)
        total_us.append((t2 - t0) * 1e6)
    return statistics.median(feat_us), statistics.median(total_us), artifact is not None


def import_torch_median(runs: int, env_extra: dict) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env.update(env_extra)
    code = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def inductor_imported_by_import_torch(env_extra: dict) -> bool:
    """Whether ``import torch`` alone imported Inductor in a fresh process with these variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_AUTOHEURISTIC", "AH_"))}
    env.update(env_extra)
    code = "import sys, torch; print('torch._inductor' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes per import variant")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()

    feat_us, total_us, have_artifact = per_lowering()
    # interleave the two variants so machine load drifts affect both alike
    off, autoload_off, use = [], [], []
    for _ in range(args.runs):
        off.append(import_torch_median(1, {}))
        autoload_off.append(import_torch_median(1, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}))
        use.append(import_torch_median(1, {"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"}))
    off_med, base_med, use_med = statistics.median(off), statistics.median(autoload_off), statistics.median(use)
    use_verdict = "PASS" if use_med - off_med <= USE_BAR_S else "FAIL"
    inductor_at_import = inductor_imported_by_import_torch({"TORCHINDUCTOR_AUTOHEURISTIC_USE": "mm"})
    rank_note = "MMRankingH100 (artifacts/)" if have_artifact else "no artifact in artifacts/: ranking not measured"
    body = "\n".join([
        "## Plugin overhead",
        "",
        f"Command: `python benchmarks/plugin_overhead.py --runs {args.runs}` "
        f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)",
        "",
        "| measure | median |",
        "| --- | --- |",
        f"| features per mm lowering | {feat_us:.1f} us |",
        f"| features + ranking + top-k per mm lowering ({rank_note}) | {total_us:.1f} us |",
        f"| `import torch`, plugin installed, switched off ({args.runs} fresh processes) | {off_med * 1000:.0f} ms |",
        f"| `import torch`, `TORCH_DEVICE_BACKEND_AUTOLOAD=0` ({args.runs} fresh processes) | {base_med * 1000:.0f} ms |",
        f"| difference | {(off_med - base_med) * 1000:+.0f} ms (spread of runs: {min(off) * 1000:.0f}-{max(off) * 1000:.0f} ms vs {min(autoload_off) * 1000:.0f}-{max(autoload_off) * 1000:.0f} ms) |",
        f"| `import torch`, switched on: `TORCHINDUCTOR_AUTOHEURISTIC_USE=mm` ({args.runs} fresh processes) | {use_med * 1000:.0f} ms (spread {min(use) * 1000:.0f}-{max(use) * 1000:.0f} ms) |",
        "",
        f"Bar: with USE=mm set, `import torch` within {USE_BAR_S * 1000:.0f} ms of the plugin switched off (median "
        f"of {args.runs}): {use_med * 1000:.0f} ms against {off_med * 1000:.0f} ms, "
        f"{(use_med - off_med) * 1000:+.0f} ms -> **{use_verdict}**; Inductor imported by `import torch` with "
        f"USE=mm: {'yes' if inductor_at_import else 'no'}. Switched on, the plugin reads its settings "
        "at `import torch` and puts its hooks into Inductor when torch first imports it (the first "
        "`torch.compile`), so Inductor's import is paid there, as without the plugin.",
    ])
    publish(RESULTS, "plugin_overhead", body, write=not args.no_write)


if __name__ == "__main__":
    main()
