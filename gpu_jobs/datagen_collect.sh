#!/usr/bin/env bash
# H200 collection batch: random mm inputs through the plugin's collector, two warm workers per GPU taking turns on it (WORKERS_PER_GPU), BATCH_SIZE
# inputs (same dtype/TF32) per compiled graph (a failed batch is retried input by input).
# Stops starting inputs after MINUTES and leaves a valid, resumable log in $OUT (copy it into datasets/h200/).
# Resumes: if datasets/h200/h200_mm.txt.gz (or a plain h200_mm.txt) and its journal h200_mm.txt.progress.jsonl
# exist, they are copied into $OUT first (decompressed), so the next batch skips inputs already done there.
# RESUME_FROM=none starts a fresh log (inputs from a new --first-sample range, merged in afterwards). Expected wall time: MINUTES + STOP_GRACE/60 + ~1
# minute (in-flight batches get STOP_GRACE seconds to finish; a batch cut off there leaves no rows).
#
#   MINUTES=8 NUM_SAMPLES=2000 SEED=0 FIRST_SAMPLE=0 BATCH_SIZE=8 bash gpu_jobs/datagen_collect.sh
set -euo pipefail
: "${OUT:?set OUT to the output folder}"
MINUTES="${MINUTES:-8}"
NUM_SAMPLES="${NUM_SAMPLES:-2000}"
SEED="${SEED:-0}"
FIRST_SAMPLE="${FIRST_SAMPLE:-0}"
NUM_REPS="${NUM_REPS:-3}"
TIMEOUT="${TIMEOUT:-120}"   # per input; a batch gets TIMEOUT x its size
BATCH_SIZE="${BATCH_SIZE:-8}"
BATCH_MEMORY_GB="${BATCH_MEMORY_GB:-40}"
STOP_GRACE="${STOP_GRACE:-90}"
SEARCH_SAMPLE="${SEARCH_SAMPLE:-20}"
MAX_EST_MS="${MAX_EST_MS:-}"   # leave out inputs estimated above this many ms per call (empty: none)
WORKERS_PER_GPU="${WORKERS_PER_GPU:-2}"   # two workers per GPU taking turns, 1.5x the inputs per GPU-minute (docs/datagen.md); 1: one
COST_ARGS=""; [ -n "$MAX_EST_MS" ] && COST_ARGS="--max-estimated-ms $MAX_EST_MS"
NUM_GPUS="${NUM_GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}"
[ "$NUM_GPUS" -ge 1 ] || NUM_GPUS=1
RESUME_FROM="${RESUME_FROM:-datasets/h200/h200_mm.txt.gz}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."

mkdir -p "$OUT"
LOG="$OUT/h200_mm.txt"
. "$(dirname "$0")/resume_lib.sh"
resume_copy "$RESUME_FROM" "$LOG"
python3 -c 'import torch, triton, json, sys; print(json.dumps({"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}))' > "$OUT/environment.json" || true
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUT/started_utc.txt"

python3 -m torchgen_ah.mm.gen_data_mm -o "$LOG" \
  --num-samples "$NUM_SAMPLES" --seed "$SEED" --first-sample "$FIRST_SAMPLE" --num-reps "$NUM_REPS" \
  --num-gpus "$NUM_GPUS" --workers-per-gpu "$WORKERS_PER_GPU" --timeout-per-sample "$TIMEOUT" --max-minutes "$MINUTES" --stop-grace-seconds "$STOP_GRACE" \
  --batch-size "$BATCH_SIZE" --batch-memory-gb "$BATCH_MEMORY_GB" \
  --search-space wide --search-space-sample "$SEARCH_SAMPLE" $COST_ARGS --cache-root "${TMPDIR:-/tmp}/ah_gen_cache" \
  --no-progress 2>&1 | tail -n 200 > "$OUT/collect_stderr.txt"

echo "command: python3 -m torchgen_ah.mm.gen_data_mm -o h200_mm.txt --num-samples $NUM_SAMPLES --seed $SEED --first-sample $FIRST_SAMPLE --num-reps $NUM_REPS --num-gpus $NUM_GPUS --workers-per-gpu $WORKERS_PER_GPU --timeout-per-sample $TIMEOUT --max-minutes $MINUTES --batch-size $BATCH_SIZE --batch-memory-gb $BATCH_MEMORY_GB --search-space wide --search-space-sample $SEARCH_SAMPLE $COST_ARGS" > "$OUT/command.txt"
cp "$LOG.done.json" "$OUT/${RUN_NAME:-run}.done.json" 2>/dev/null || true
rm -rf "$LOG.workers.tar.gz"; tar czf "$LOG.workers.tar.gz" -C "$OUT" "$(basename "$LOG").workers" && rm -rf "$LOG.workers"
tail -n 3 "$OUT/collect_stderr.txt"
python3 - "$LOG" <<'PY'
import sys, collections, json
from torchgen_ah.data.ah_log import read_log, input_keys
log = read_log(sys.argv[1])
keys = input_keys(log.frame, log.metadata)
status = collections.Counter(json.loads(l)["status"] for l in open(sys.argv[1] + ".progress.jsonl") if l.strip())
print(f"{sys.argv[1]}: {len(log.frame)} rows, {keys.nunique()} inputs, {log.frame['choice'].nunique()} choices; journal {dict(status)}")
PY
