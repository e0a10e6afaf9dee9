#!/usr/bin/env bash
# Issue 7 on one multi-GPU host. Every collection run times the SAME inputs (samples FIRST..FIRST+SAMPLES-1
# of seed 0, cost cap MAX_EST_MS), so their rates compare on the same work:
#  1. gen_data_mm with one worker on GPU 0: the reference rate, $OUT/one/h200_mm_one.txt;
#  2. gen_data_mm with one worker per GPU: $OUT/all/h200_mm_all.txt;
#  3. the same under `torchrun --nproc-per-node N`, merged with the metadata check: $OUT/torchrun/h200_mm_torchrun.txt;
#  4. benchmarks/mgpu_model_tune.py: a real model's untuned GEMMs tuned on all GPUs, _full0 + copies, all hits after;
#  5. benchmarks/multigpu_collect.py: the table (rates per GPU-minute, per-GPU ratio to one GPU, per-choice
#     agreement with the one-GPU run on the same inputs, metadata check).
# Runs 1-3 time the same inputs three times: merge only run 1's log into the dataset
#   python -m torchgen_ah.merge_data --force datasets/h200/h200_mm.txt.gz datasets/h200/h200_mm.txt.gz one/h200_mm_one.txt
# and keep the other two as the agreement check. Each run has a safety time limit (RUN_MIN, default 4
# minutes, and never more than a fair share of what is left of CALL_MIN, default 9, for the runs still to
# come); a run it stops is marked "not finished" in the table, its rate not comparable. Few samples make the
# per-GPU ratio depend on which worker drew the slow inputs: use SAMPLES >= 16 when the call has room.
# A device call lasts at most 10 minutes: PART=collect runs 1-3 (about 6-7 minutes with SAMPLES=10 on 2
# GPUs: the one-GPU run takes as long as the other two together), PART=tune runs 4 in a second call (about
# 4.5 minutes on 2 GPUs, TUNE_TIMEOUT default 400 s). PART=collect writes the table (5) at its end;
# PART=pair runs 1-2 only (room for more SAMPLES) and writes their table; PART=torchrun runs 3 alone, and
# the table of all three is then made from both calls' folders with benchmarks/multigpu_collect.py.
#   OUT=... PART=collect SAMPLES=10 MAX_EST_MS=20 bash gpu_jobs/multigpu.sh
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
N="$(nvidia-smi -L 2>/dev/null | wc -l)"; [ "$N" -ge 1 ] || N=1
SAMPLES="${SAMPLES:-10}"; FIRST="${FIRST:-400000}"; RUN_MIN="${RUN_MIN:-4}"; MAX_EST_MS="${MAX_EST_MS:-20}"
CALL_MIN="${CALL_MIN:-9}"
PART="${PART:-all}"; BATCH_SIZE="${BATCH_SIZE:-2}"
COMMON="--seed 0 --num-reps 2 --search-space wide --search-space-sample 20 --max-estimated-ms $MAX_EST_MS \
  --timeout-per-sample 120 --stop-grace-seconds 30 --batch-size $BATCH_SIZE --no-progress \
  --first-sample $FIRST --num-samples $SAMPLES"
budget() {  # minutes for the next run: RUN_MIN, or a fair share of what the call has left for $1 runs
  python3 -c "left = $CALL_MIN - $SECONDS / 60 - 0.75; print(round(max(0.5, min($RUN_MIN, left / $1)), 2))"
}
mkdir -p "$OUT/one" "$OUT/all" "$OUT/torchrun" "$OUT/runs"
ONE="$OUT/one/h200_mm_one.txt"; ALL="$OUT/all/h200_mm_all.txt"; TR="$OUT/torchrun/h200_mm_torchrun.txt"
COLLECT=0; case "$PART" in all|collect|pair) COLLECT=1;; esac
# the one-GPU run takes about as long as the runs after it together: 2 with torchrun to come, 1.5 without
if [ $COLLECT = 1 ]; then
REST=2; AFTER=2; [ "$PART" = pair ] && { REST=1.5; AFTER=1; }
python3 -m torchgen_ah.mm.gen_data_mm -o "$ONE" $COMMON --num-gpus 1 --max-minutes "$(budget $REST)" > "$OUT/runs/one.txt" 2>&1
cp "$ONE.done.json" "$OUT/runs/one.done.json"
python3 -m torchgen_ah.mm.gen_data_mm -o "$ALL" $COMMON --num-gpus "$N" --max-minutes "$(budget $AFTER)" > "$OUT/runs/all.txt" 2>&1
cp "$ALL.done.json" "$OUT/runs/all.done.json"
fi
if [ "$PART" != tune ] && [ "$PART" != pair ]; then
torchrun --standalone --nproc-per-node "$N" -m torchgen_ah.mm.gen_data_mm -o "$OUT/torchrun/h200_mm_tr.txt" $COMMON \
  --max-minutes "$(budget 1)" --merge-to "$TR" > "$OUT/runs/torchrun.txt" 2>&1
python3 - "$OUT/runs/torchrun.done.json" "$OUT"/torchrun/h200_mm_tr.rank*.txt.done.json <<'PY'
import collections, json, os, sys  # the torchrun run as one: all ranks' inputs over the slowest rank's wall time
out, parts = sys.argv[1], [json.load(open(p)) for p in sys.argv[2:] if os.path.exists(p)]
if parts:
    failed = collections.Counter()
    for p in parts:
        failed.update(p.get("failed", {}))
    total = {key: sum(p.get(key, 0) for p in parts) for key in ("ok", "excluded", "interrupted", "not_started", "skipped")}
    json.dump({**total, "seconds": max(p["seconds"] for p in parts), "failed": dict(failed)}, open(out, "w"))
PY
fi
if [ $COLLECT = 1 ]; then
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $N, $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)')"
python3 benchmarks/multigpu_collect.py --gpu "$GPU" \
  --command "OUT=... SAMPLES=$SAMPLES FIRST=$FIRST MAX_EST_MS=$MAX_EST_MS BATCH_SIZE=$BATCH_SIZE bash gpu_jobs/multigpu.sh" \
  --run "one GPU:1:$OUT/runs/one.done.json:$ONE" --run "one worker per GPU:$N:$OUT/runs/all.done.json:$ALL" \
  --run "torchrun --nproc-per-node $N:$N:$OUT/runs/torchrun.done.json:$TR" \
  > "$OUT/multigpu_collect.txt" 2>&1
fi
[ "$PART" = all ] || [ "$PART" = tune ] || {
  tail -n 3 "$OUT"/runs/*.txt; cat "$OUT/multigpu_collect.txt" 2>/dev/null; cp benchmarks/RESULTS.md "$OUT/RESULTS.md"; exit 0; }
timeout "${TUNE_TIMEOUT:-400}" python3 benchmarks/mgpu_model_tune.py --device cuda --num-gpus "$N" --out-dir /tmp/ah_mgpu_tune \
  > "$OUT/mgpu_model_tune.txt" 2>&1
cp /tmp/ah_mgpu_tune/mgpu_model_tune.json /tmp/ah_mgpu_tune/mgpu.txt "$OUT/" 2>/dev/null
cat "$OUT/mgpu_model_tune.txt" | tail -40
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
