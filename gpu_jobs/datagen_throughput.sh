#!/usr/bin/env bash
# Throughput benchmark on one H200: warm worker with batches of BATCH_SIZE inputs per compiled graph vs a
# fresh process per input (upstream way), same K=NUM_SHAPES bf16 shapes (dims <= 4096), NUM_REPS reps.
# The fresh-process rate is measured on the first FRESH_SUBSET inputs. Expected wall time: ~4-5 minutes
# (batched way ~1-2 min, fresh way ~1 min per input). Writes its RESULTS.md section; copies RESULTS.md,
# the two logs and the warm worker's log to $OUT. SHARED_GPU=2 also measures two workers sharing the GPU
# (--workers-per-gpu 2) against one; NO_FRESH=1 skips the fresh-process way.
set -euo pipefail
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
python3 benchmarks/collect_throughput.py --num-shapes "${NUM_SHAPES:-24}" --num-reps "${NUM_REPS:-2}" \
  --batch-size "${BATCH_SIZE:-8}" --fresh-subset "${FRESH_SUBSET:-3}" --max-dim "${MAX_DIM:-4096}" \
  --out-dir "$OUT/collect_throughput" ${SHARED_GPU:+--shared-gpu "$SHARED_GPU"} ${NO_FRESH:+--no-fresh} 2>&1 | tail -n 80
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
