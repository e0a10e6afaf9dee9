#!/usr/bin/env bash
# Two independent lanes of gpu_jobs steps on a 2-GPU host, run at the same time: lane A on GPU 0 and host
# cores 0..C/2-1, lane B on GPU 1 and the other half of the cores (taskset where present), so neither
# lane's compile work slows the other's. Each lane is gpu_jobs/run_batch.sh with its own steps; the
# package is installed once first. Results: $OUT/lane_a.tgz and $OUT/lane_b.tgz.
#
#   OUT=... LANE_A="NAME:SECONDS:COMMAND|..." LANE_B="NAME:SECONDS:COMMAND|..." bash gpu_jobs/two_lanes.sh
set -u
: "${OUT:?set OUT to the output folder}"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1 \
  || { echo "editable install failed; using PYTHONPATH" >> "$OUT/install.txt"; export PYTHONPATH=$PWD; }
cores=$(nproc); half=$((cores / 2))
pin() {  # pin LANE_INDEX: the taskset prefix for a lane, empty without taskset
  command -v taskset > /dev/null || return 0
  if [ "$1" = 0 ]; then echo "taskset -c 0-$((half - 1))"; else echo "taskset -c $half-$((cores - 1))"; fi
}
lane() {  # lane INDEX NAME STEPS
  local steps; IFS='|' read -r -a steps <<< "$3"  # IFS only for the read: the taskset prefix below must split on spaces
  CUDA_VISIBLE_DEVICES=$1 AH_SKIP_INSTALL=1 AH_BATCH_DIR=/tmp/ah_lane_$2 AH_BATCH_NAME=lane_$2 \
    $(pin "$1") bash gpu_jobs/run_batch.sh "${steps[@]}" > "$OUT/lane_$2.txt" 2>&1
}
[ -n "${LANE_A:-}" ] && lane 0 a "$LANE_A" &
[ -n "${LANE_B:-}" ] && lane 1 b "$LANE_B" &
wait
tail -n 40 "$OUT"/lane_*.txt
