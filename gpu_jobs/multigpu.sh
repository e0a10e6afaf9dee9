#!/usr/bin/env bash
# Issue 7 on one multi-GPU host in one device call (about ONE_MIN + ALL_MIN + TR_MIN + 3 minutes):
#  1. gen_data_mm with one worker on GPU 0 for ONE_MIN minutes: the reference rate;
#  2. gen_data_mm with one worker per GPU for ALL_MIN minutes (same distribution and cost cap, later samples);
#  3. the same collection under `torchrun --nproc-per-node N` for TR_MIN minutes, merged with the metadata check;
#  4. benchmarks/mgpu_model_tune.py: a real model's untuned GEMMs tuned on all GPUs, _full0 + copies, all hits after;
#  5. benchmarks/multigpu_collect.py: the table (rates per GPU-minute, per-GPU ratio to one GPU, metadata check).
# Runs 1-2 append to $OUT/h200_mm.txt, resumed from datasets/h200/h200_mm.txt (copy it back afterwards);
# run 3 writes $OUT/torchrun/h200_mm_torchrun.txt (merge it into the dataset with torchgen_ah.merge_data).
#   OUT=... ONE_MIN=2 ALL_MIN=3 TR_MIN=2 MAX_EST_MS=20 bash gpu_jobs/multigpu.sh
# A device call lasts at most 10 minutes: PART=collect runs 1-3 (about ONE_MIN + ALL_MIN + TR_MIN + 2.5
# minutes, each run's worker start and stop grace included), PART=tune runs 4-5 in a second call (about 4
# minutes; it reads the collect part's files: RUNS_FROM=<a folder in the working tree holding what the
# collect call returned under $OUT> copies them into $OUT first).
# Short runs need small batches (BATCH_SIZE, default 4): a batch of 8 upstream inputs takes 2-3 minutes.
#   OUT=... PART=collect ONE_MIN=2 ALL_MIN=2 TR_MIN=1.5 MAX_EST_MS=20 bash gpu_jobs/multigpu.sh
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
N="$(nvidia-smi -L 2>/dev/null | wc -l)"; [ "$N" -ge 1 ] || N=1
ONE_MIN="${ONE_MIN:-2}"; ALL_MIN="${ALL_MIN:-3}"; TR_MIN="${TR_MIN:-2}"; MAX_EST_MS="${MAX_EST_MS:-20}"
PART="${PART:-all}"; BATCH_SIZE="${BATCH_SIZE:-4}"
COMMON="--seed 0 --num-reps 2 --search-space wide --search-space-sample 20 --max-estimated-ms $MAX_EST_MS \
  --timeout-per-sample 120 --stop-grace-seconds 30 --batch-size $BATCH_SIZE --no-progress"
mkdir -p "$OUT/torchrun" "$OUT/runs"
[ -n "${RUNS_FROM:-}" ] && cp -r "$RUNS_FROM"/. "$OUT"/
LOG="$OUT/h200_mm.txt"
if [ -f datasets/h200/h200_mm.txt ] && [ ! -f "$LOG" ]; then
  cp datasets/h200/h200_mm.txt "$LOG"; cp datasets/h200/h200_mm.txt.progress.jsonl "$LOG.progress.jsonl" 2>/dev/null
fi
if [ "$PART" != tune ]; then
python3 -m torchgen_ah.mm.gen_data_mm -o "$LOG" $COMMON --num-gpus 1 --first-sample 100000 --num-samples 100000 \
  --max-minutes "$ONE_MIN" > "$OUT/runs/one.txt" 2>&1; cp "$LOG.done.json" "$OUT/runs/one.done.json"
python3 -m torchgen_ah.mm.gen_data_mm -o "$LOG" $COMMON --num-gpus "$N" --first-sample 200000 --num-samples 100000 \
  --max-minutes "$ALL_MIN" > "$OUT/runs/all.txt" 2>&1; cp "$LOG.done.json" "$OUT/runs/all.done.json"
torchrun --standalone --nproc-per-node "$N" -m torchgen_ah.mm.gen_data_mm -o "$OUT/torchrun/h200_mm_tr.txt" $COMMON \
  --first-sample 300000 --num-samples 100000 --max-minutes "$TR_MIN" \
  --merge-to "$OUT/torchrun/h200_mm_torchrun.txt" > "$OUT/runs/torchrun.txt" 2>&1
cp "$OUT/torchrun/h200_mm_tr.rank0.txt.done.json" "$OUT/runs/torchrun.done.json" 2>/dev/null
python3 - "$OUT/runs/torchrun.done.json" "$OUT"/torchrun/h200_mm_tr.rank*.txt.done.json <<'PY'
import json, sys  # the torchrun run as one: inputs of all ranks over the slowest rank's wall time
out, parts = sys.argv[1], [json.load(open(p)) for p in sys.argv[2:]]
if parts:
    json.dump({"ok": sum(p["ok"] for p in parts), "seconds": max(p["seconds"] for p in parts),
               "failed": {}, "excluded": sum(p.get("excluded", 0) for p in parts)}, open(out, "w"))
PY
fi
[ "$PART" = collect ] && { tail -n 3 "$OUT"/runs/*.txt; exit 0; }
timeout 240 python3 benchmarks/mgpu_model_tune.py --device cuda --num-gpus "$N" --out-dir /tmp/ah_mgpu_tune \
  > "$OUT/mgpu_model_tune.txt" 2>&1
cp /tmp/ah_mgpu_tune/mgpu_model_tune.json /tmp/ah_mgpu_tune/mgpu.txt "$OUT/" 2>/dev/null
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $N, $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)')"
python3 benchmarks/multigpu_collect.py --gpu "$GPU" \
  --command "OUT=... ONE_MIN=$ONE_MIN ALL_MIN=$ALL_MIN TR_MIN=$TR_MIN MAX_EST_MS=$MAX_EST_MS BATCH_SIZE=$BATCH_SIZE bash gpu_jobs/multigpu.sh" \
  --run "one GPU:1:$OUT/runs/one.done.json:$LOG" --run "one worker per GPU:$N:$OUT/runs/all.done.json:$LOG" \
  --run "torchrun --nproc-per-node $N:$N:$OUT/runs/torchrun.done.json:$OUT/torchrun/h200_mm_torchrun.txt" \
  > "$OUT/multigpu_collect.txt" 2>&1
cat "$OUT/multigpu_collect.txt" "$OUT/mgpu_model_tune.txt" | tail -40
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
