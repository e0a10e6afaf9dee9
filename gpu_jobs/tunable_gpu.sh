#!/usr/bin/env bash
# Results cache (issue 4) on one GPU, about 9 minutes (about 4.5 with SKIP_TESTS=1 SKIP_OFFLINE=1):
#  1. the tunable tests (CPU-path e2e, file layer, offline) on this machine's torch;
#  2. benchmarks/tunable_compile.py (at most TC_MAX_MINUTES=4 minutes of runs): a small real model
#     compiled with max-autotune off, and default autotuning / a tuning run / a cache hit (tuning off),
#     each under max-autotune mode and under GEMM autotuning only, from cold caches and again on a warm
#     kernel cache (FX graph, AOTAutograd and autotune-results caches off); TC_VARIANTS=gemm runs only
#     the GEMM-autotuning-only variant (the bar's like-for-like comparison);
#  3. offline tuning of the untuned shapes recorded with tuning off, on every GPU of the host.
# Writes $OUT/tests.txt, $OUT/tunable_compile.{md,json}, $OUT/tc/* (results files, verbose logs),
# $OUT/results0.csv, $OUT/RESULTS.md, $OUT/offline/*. The Inductor caches stay in $TC_WORK (not in $OUT).
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/offline"
if [ -z "${SKIP_TESTS:-}" ]; then  # SKIP_TESTS=1: the CPU-path tests already ran elsewhere (every test: slow ones too)
  python3 -m pytest tests/test_tunable_file.py tests/test_tunable_e2e.py tests/test_tunable_offline.py tests/test_tunable_limits.py tests/test_tunable_bias.py -m "slow or not slow" -q \
    --durations=10 > "$OUT/tests.txt" 2>&1; echo "tests rc=$?" >> "$OUT/tests.txt"
fi
TC_WORK="${TC_WORK:-/tmp/tunable_tc}"
python3 benchmarks/tunable_compile.py --out-dir "$TC_WORK" --device cuda --max-minutes "${TC_MAX_MINUTES:-4}" \
  --variants "${TC_VARIANTS:-mode,gemm}" \
  | tee "$OUT/tunable_compile.md"
for run_dir in "$TC_WORK"/*/; do  # results files and verbose logs only, not the kernel caches
  name="$(basename "$run_dir")"; mkdir -p "$OUT/tc/$name"
  cp "$run_dir"results_*.csv "$run_dir"verbose_*.txt "$OUT/tc/$name/" 2>/dev/null || true
done
cp "$TC_WORK/mode_tune/results_cold0.csv" "$OUT/results0.csv" 2>/dev/null || true
cp "$TC_WORK/tunable_compile.json" "$OUT/" 2>/dev/null || true
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
[ -n "${SKIP_OFFLINE:-}" ] && exit 0  # SKIP_OFFLINE=1: the benchmark only
# Offline: record untuned shapes with tuning off (empty results file), then tune them on all GPUs.
cd "$OUT/offline"
AH_TUNABLE_ENABLED=1 AH_TUNABLE_TUNING=0 AH_TUNABLE_RECORD_UNTUNED=1 TORCHINDUCTOR_CACHE_DIR="$OUT/offline/ind0" \
  python3 -c 'import torch; m=torch.nn.Linear(768,3072,device="cuda",dtype=torch.bfloat16); x=torch.randn(1000,768,device="cuda",dtype=torch.bfloat16); torch.compile(m,mode="max-autotune-no-cudagraphs")(x); torch.cuda.synchronize()'
NUM_GPUS="$(nvidia-smi -L 2>/dev/null | wc -l)"
TORCHINDUCTOR_CACHE_DIR="$OUT/offline/ind1" AH_TUNABLE_NUMERICAL_CHECK=1e-2_1e-2 \
  python3 -m ah_plugin.tunable.offline mgpu 'ah_tunable_untuned*.csv' "${NUM_GPUS:-1}" > mgpu.txt 2>&1
echo "mgpu rc=$?" >> mgpu.txt
ls -la "$OUT/offline" > "$OUT/offline/listing.txt"
