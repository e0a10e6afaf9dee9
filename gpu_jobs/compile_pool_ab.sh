#!/usr/bin/env bash
# A/B of gen_data_mm's --compile-pool on the 2-GPU host (docs/datagen.md, "Compile pool"): the same inputs
# collected the same way (two workers per GPU, 2 repetitions, compile-only warm-up), once with Inductor's
# subprocess pool (lane A: GPU 0, first half of the cores) and once compiling in the workers' own threads
# (lane B: GPU 1, other half), at the same time. Each arm times the first DECODE_N GEMMs of the decoding list
# (small kernels), then random inputs from RANDOM_FIRST (upstream distribution, wide space, 20 ms cap),
# (MINUTES-1.5)/2 each (each part's stop grace and shutdown fit in the rest). Results: $OUT/lane_a.tgz and
# lane_b.tgz (logs, journals, worker logs); compare them with
#
#   OUT=... MINUTES=8 bash gpu_jobs/compile_pool_ab.sh
#   python benchmarks/compile_pool_ab.py --inductor A/pool --in-process B/in_process --write
#
# where A and B are the unpacked lane tarballs (the step folders are named 'pool' and 'in_process':
# run_batch.sh leaves out folders named ind*, Inductor's caches). Expected wall time: MINUTES + ~1 minute
# (each lane's step is cut at MINUTES + 45 s, so the tarballs are written inside a 10-minute device call
# at MINUTES=8).
set -u
: "${OUT:?set OUT to the output folder}"
MINUTES="${MINUTES:-8}"
DECODE_N="${DECODE_N:-40}"
RANDOM_FIRST="${RANDOM_FIRST:-1300000}"
RANDOM_N="${RANDOM_N:-40}"

if [ -n "${ARM:-}" ]; then  # one arm, run by a lane of two_lanes.sh (its GPU is the only one visible)
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
  half=$(python3 -c "print(round(max(0.5, ($MINUTES - 1.5) / 2), 2))")
  common=(--num-reps 2 --batch-size 2 --num-gpus 1 --workers-per-gpu 2 --timeout-per-sample 120
          --max-minutes "$half" --no-progress --compile-pool "$ARM")
  python3 -m torchgen_ah.mm.gen_data_mm --shapes datasets/h200/h200_hf_decode_gemms.csv \
    --num-samples "$DECODE_N" -o "$OUT/decode.txt" --search-space default --stop-grace-seconds 20 \
    "${common[@]}" > "$OUT/decode.stderr.txt" 2>&1
  echo "decode rc=$?: $(tail -n 1 "$OUT/decode.stderr.txt")"
  python3 -m torchgen_ah.mm.gen_data_mm -o "$OUT/random.txt" --seed 0 --first-sample "$RANDOM_FIRST" \
    --num-samples "$RANDOM_N" --search-space wide --search-space-sample 20 --max-estimated-ms 20 \
    --stop-grace-seconds 25 "${common[@]}" > "$OUT/random.stderr.txt" 2>&1
  echo "random rc=$?: $(tail -n 1 "$OUT/random.stderr.txt")"
  echo "ARM=$ARM MINUTES=$MINUTES DECODE_N=$DECODE_N RANDOM_FIRST=$RANDOM_FIRST RANDOM_N=$RANDOM_N half=$half" \
    > "$OUT/command_ab.txt"
  exit 0
fi

secs=$(python3 -c "print(int($MINUTES * 60 + 45))")
OUT="$OUT" \
  LANE_A="pool:$secs:ARM=inductor MINUTES=$MINUTES DECODE_N=$DECODE_N RANDOM_FIRST=$RANDOM_FIRST RANDOM_N=$RANDOM_N bash gpu_jobs/compile_pool_ab.sh" \
  LANE_B="in_process:$secs:ARM=in-process MINUTES=$MINUTES DECODE_N=$DECODE_N RANDOM_FIRST=$RANDOM_FIRST RANDOM_N=$RANDOM_N bash gpu_jobs/compile_pool_ab.sh" \
  bash gpu_jobs/two_lanes.sh
ls -la "$OUT"
