#!/usr/bin/env bash
# Results cache (issue 4) on one GPU, about 6 minutes:
#  1. the tunable tests (CPU-path e2e, file layer, offline) on this machine's torch;
#  2. benchmarks/tunable_compile.py: a small real model compiled with max-autotune off, default
#     max-autotune, a tuning run, and a cache hit (tuning off) from fresh Inductor caches;
#  3. offline tuning of the untuned shapes recorded with tuning off, on every GPU of the host.
# Writes $OUT/tests.txt, $OUT/tunable_compile.{md,json}, $OUT/results0.csv, $OUT/offline/*.
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/offline"
if [ -z "${SKIP_TESTS:-}" ]; then  # SKIP_TESTS=1: the CPU-path tests already ran elsewhere
  python3 -m pytest tests/test_tunable_file.py tests/test_tunable_e2e.py tests/test_tunable_offline.py -q \
    --durations=10 > "$OUT/tests.txt" 2>&1; echo "tests rc=$?" >> "$OUT/tests.txt"
fi
python3 benchmarks/tunable_compile.py --out-dir "$OUT/tc" --device cuda | tee "$OUT/tunable_compile.md"
cp "$OUT/tc/results0.csv" "$OUT/results0.csv" 2>/dev/null || true
cp "$OUT/tc/tunable_compile.json" "$OUT/" 2>/dev/null || true
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
# Offline: record untuned shapes with tuning off (empty results file), then tune them on all GPUs.
cd "$OUT/offline"
AH_TUNABLE_ENABLED=1 AH_TUNABLE_TUNING=0 AH_TUNABLE_RECORD_UNTUNED=1 TORCHINDUCTOR_CACHE_DIR="$OUT/offline/ind0" \
  python3 -c 'import torch; m=torch.nn.Linear(768,3072,device="cuda",dtype=torch.bfloat16); x=torch.randn(1000,768,device="cuda",dtype=torch.bfloat16); torch.compile(m,mode="max-autotune-no-cudagraphs")(x); torch.cuda.synchronize()'
NUM_GPUS="$(nvidia-smi -L 2>/dev/null | wc -l)"
TORCHINDUCTOR_CACHE_DIR="$OUT/offline/ind1" AH_TUNABLE_NUMERICAL_CHECK=1e-2_1e-2 \
  python3 -m ah_plugin.tunable.offline mgpu 'ah_tunable_untuned*.csv' "${NUM_GPUS:-1}" > mgpu.txt 2>&1
echo "mgpu rc=$?" >> mgpu.txt
ls -la "$OUT/offline" > "$OUT/offline/listing.txt"
