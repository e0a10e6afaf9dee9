"""Offline tuning of a real model's GEMMs on every GPU of a host.

Three fresh processes and one tuning launch, all with their own Inductor cache folders:

1. **record**: a small real model (BERT-base, 2 layers, random weights from its config; two batch shapes;
   bf16 on CUDA, fp32 under freezing on the CPU) compiled with max-autotune, the results cache on, tuning
   off and record-untuned on: every GEMM shape lands in ``untuned<ordinal>.csv`` and nothing is tuned;
2. **tune**: ``python -m ah_plugin.tunable.offline mgpu 'untuned*.csv' N``: shapes dealt round-robin to one
   worker per GPU, gathered into ``results_full0.csv`` and copied to ``results_full1..N-1``;
3. **check**: every per-GPU copy is byte-identical to ``_full0``, reads back with this process's validators
   and holds one row per recorded shape;
4. **hit**: the model again with tuning off on ``_full0``: every GEMM must hit, nothing is benchmarked and no
   shape is recorded as untuned.

    python benchmarks/mgpu_model_tune.py --device cuda --num-gpus 2 --out-dir /tmp/mgpu

Prints a table and writes its section of ``benchmarks/RESULTS.md`` (``<!-- BEGIN mgpu_model_tune -->``).
On a machine without GPUs, ``--device cpu --num-gpus 2`` runs the same flow with CPU processes standing in.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from ah_plugin.tunable import results_file as F
from torchgen_ah.evaluation.results_section import publish

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
SECTION = "mgpu_model_tune"

CHILD = r"""
import json, sys, torch
import ah_plugin
from ah_plugin.inductor import compile_tools
ah_plugin.require_active_from_environment()  # the step's results-cache settings, entry point or not
device = sys.argv[1]
benchmarked = []
compile_tools.on_benchmarked(lambda name, count: benchmarked.append([name, count]))
if device == "cpu":
    compile_tools.freeze_constant_weights()
dtype = torch.bfloat16 if device == "cuda" else torch.float32
torch.manual_seed(0)
try:
    from transformers import BertConfig, BertModel
    cfg = BertConfig(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072)
    if device == "cpu":  # a smaller BERT keeps the CPU stand-in quick
        cfg = BertConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=2, intermediate_size=128)
    model = BertModel(cfg).to(device=device, dtype=dtype).eval()
    batches = [torch.randint(0, cfg.vocab_size, shape, device=device) for shape in ((8, 128), (2, 384))]
    name = f"BERT hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers"
except ImportError:
    width = 768 if device == "cuda" else 64
    model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                torch.nn.Linear(4 * width, width)).to(device=device, dtype=dtype).eval()
    batches = [torch.randn(rows, width, device=device, dtype=dtype) for rows in (1024, 768)]
    name = f"MLP {width}-{4 * width}-{width}"
with torch.no_grad():
    for x in batches:
        torch.compiler.reset()
        torch.compile(model, mode="max-autotune-no-cudagraphs")(x)
if device == "cuda":
    torch.cuda.synchronize()
import ah_plugin.tunable as tunable
print("RESULT " + json.dumps({"model": name + ", " + str(dtype).replace("torch.", ""),
                              "stats": tunable.get_stats(), "benchmarked": benchmarked}))
"""


def _env(work: str, cache: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AH_", "TORCHINDUCTOR_", "TRITON_CACHE"))}
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, cache)
    env.update(extra)
    return env


def run_model(device: str, work: str, cache: str, **extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, device], cwd=work, env=_env(work, cache, **extra),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"model run ({cache}) failed:\n{proc.stderr[-4000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def check_full_files(work: str, num_gpus: int, expected_keys: set) -> dict:
    """Every copy equals _full0, reads back with this process's validators, and holds every shape."""
    full = [os.path.join(work, f"results_full{i}.csv") for i in range(num_gpus)]
    missing = [p for p in full if not os.path.exists(p)]
    read = F.read_results(full[0], F.current_validators()) if not missing else None
    keys = set(read.entries) if read is not None else set()
    return {
        "copies": num_gpus - len(missing),
        "identical": not missing and all(filecmp.cmp(full[0], p, shallow=False) for p in full[1:]),
        "rows": len(keys),
        "all_shapes": keys == expected_keys,
        "rejected": bool(read is not None and getattr(read, "rejected", False)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--num-gpus", type=int, default=None, help="workers (default: every visible GPU)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    if args.num_gpus is None:
        import torch  # lazy: only to count GPUs; the measured steps are child processes

        args.num_gpus = max(1, torch.cuda.device_count()) if args.device == "cuda" else 2
    work = os.path.abspath(args.out_dir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cache_env = {"AH_TUNABLE_ENABLED": "1", "AH_TUNABLE_FILENAME": os.path.join(work, "results%d.csv"),
                 "AH_TUNABLE_UNTUNED_FILENAME": os.path.join(work, "untuned%d.csv")}

    started = time.perf_counter()
    record = run_model(args.device, work, "ind_record", AH_TUNABLE_TUNING="0", AH_TUNABLE_RECORD_UNTUNED="1",
                       **cache_env)
    record_s = time.perf_counter() - started

    untuned = sorted(glob.glob(os.path.join(work, "untuned*.csv")))
    keys = {key for path in untuned for key in F.read_untuned(path)}
    if not keys:
        raise SystemExit(f"the record run left no untuned shapes in {work}")

    started = time.perf_counter()
    tune = subprocess.run([sys.executable, "-m", "ah_plugin.tunable.offline", "mgpu",
                           os.path.join(work, "untuned*.csv"), str(args.num_gpus)],
                          cwd=work, env=_env(work, "ind_tune", **cache_env), capture_output=True, text=True)
    tune_s = time.perf_counter() - started
    with open(os.path.join(work, "mgpu.txt"), "w", encoding="utf-8") as f:
        f.write(tune.stdout + tune.stderr)
    if tune.returncode != 0:
        raise SystemExit(f"mgpu tuning failed (rc {tune.returncode}):\n{tune.stderr[-4000:]}")
    check = check_full_files(work, args.num_gpus, keys)

    hit_dir = os.path.join(work, "hit")
    os.makedirs(hit_dir)
    shutil.copyfile(os.path.join(work, "results_full0.csv"), os.path.join(hit_dir, "results0.csv"))
    started = time.perf_counter()
    hit = run_model(args.device, hit_dir, "ind_hit", AH_TUNABLE_ENABLED="1", AH_TUNABLE_TUNING="0",
                    AH_TUNABLE_RECORD_UNTUNED="1", AH_TUNABLE_FILENAME=os.path.join(hit_dir, "results%d.csv"),
                    AH_TUNABLE_UNTUNED_FILENAME=os.path.join(hit_dir, "untuned%d.csv"))
    hit_s = time.perf_counter() - started
    new_untuned = {key for path in glob.glob(os.path.join(hit_dir, "untuned*.csv")) for key in F.read_untuned(path)}
    stats = hit["stats"]
    gemm_calls = stats["hits"] + stats["wildcard_hits"] + stats["misses"] + stats["stale"]
    benchmarked = sum(n for _, n in hit["benchmarked"] if n > 1)
    ok = (check["identical"] and check["all_shapes"] and not check["rejected"]
          and check["copies"] == args.num_gpus
          and stats["hits"] == gemm_calls > 0 and not new_untuned and benchmarked == 0)

    result = {"device": args.device, "num_gpus": args.num_gpus, "model": record["model"], "shapes": len(keys),
              "untuned_files": len(untuned), "record_s": record_s, "tune_s": tune_s, "hit_s": hit_s,
              "check": check, "hit_stats": stats, "hit_benchmarked": benchmarked,
              "hit_new_untuned": len(new_untuned), "ok": ok}
    with open(os.path.join(work, "mgpu_model_tune.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    publish(RESULTS, SECTION, render(result), write=not args.no_write)
    return 0 if ok else 1


def render(r: dict) -> str:
    gpu = "CPU processes standing in for GPUs"
    if r["device"] == "cuda":
        import torch  # lazy: only to name the GPU in the table

        gpu = f"{torch.cuda.get_device_name(0)} x {r['num_gpus']}, torch {torch.__version__}"
    c, s = r["check"], r["hit_stats"]
    return "\n".join([
        "## Offline tuning of a real model's GEMMs on every GPU of a host",
        "",
        f"Command: `python benchmarks/mgpu_model_tune.py --device {r['device']} "
        f"--num-gpus {r['num_gpus']} --out-dir OUT`",
        "",
        f"{gpu}; model: {r['model']}, two batch shapes, max-autotune-no-cudagraphs.",
        "",
        "| step | result | seconds |",
        "| --- | --- | --- |",
        f"| record (tuning off, record-untuned on) | {r['shapes']} GEMM shapes in {r['untuned_files']} untuned "
        f"file(s) | {r['record_s']:.1f} |",
        f"| `mgpu_tune_gemm_in_file('untuned*.csv', {r['num_gpus']})` | `_full0` + {c['copies'] - 1} copies, "
        f"identical: {c['identical']}; {c['rows']} rows, every shape: {c['all_shapes']} | {r['tune_s']:.1f} |",
        f"| model again on `_full0`, tuning off | {s['hits']} hits, {s['misses']} misses, {s['stale']} stale; "
        f"{r['hit_benchmarked']} choices benchmarked; {r['hit_new_untuned']} shapes recorded untuned "
        f"| {r['hit_s']:.1f} |",
        "",
        f"All checks pass: **{r['ok']}**.",
    ])


if __name__ == "__main__":
    sys.exit(main())
