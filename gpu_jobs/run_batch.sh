#!/usr/bin/env bash
# Runs gpu_jobs steps on the device machine one after another, each under its own time limit, and packs
# every step's output into one tarball under $OUT (the device tool returns at most 8 files).
# usage: OUT=... bash gpu_jobs/run_batch.sh NAME:SECONDS:COMMAND [NAME:SECONDS:COMMAND ...]
# Each COMMAND runs from the repo root with OUT set to its own folder; its output goes to NAME/log.txt.
set -u
: "${OUT:?set OUT to the output folder}"
REPO=$PWD
W=${AH_BATCH_DIR:-/tmp/ah_batch}
rm -rf "$W"; mkdir -p "$W"
export PYTHONUNBUFFERED=1
if [ -n "${AH_SKIP_INSTALL:-}" ]; then  # the caller installed the package already
  echo "install skipped (AH_SKIP_INSTALL)" > "$W/install.txt"
else
  python3 -m pip install -q --no-deps --no-build-isolation -e . > "$W/install.txt" 2>&1 \
    || { echo "editable install failed; using PYTHONPATH" >> "$W/install.txt"; export PYTHONPATH=$REPO; }
fi
python3 - > "$W/env.txt" 2>&1 <<'PY'
import platform, subprocess, sys, torch, triton
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)
print("gpu", torch.cuda.get_device_name(), torch.cuda.get_device_capability(), "count", torch.cuda.device_count())
print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv"],
                     capture_output=True, text=True).stdout)
PY
cat "$W/env.txt"
for step in "$@"; do
  name=${step%%:*}; rest=${step#*:}; secs=${rest%%:*}; cmd=${rest#*:}
  mkdir -p "$W/$name"; start=$(date +%s)
  ( cd "$REPO" && OUT="$W/$name" timeout -k 10 "$secs" bash -c "$cmd" ) > "$W/$name/log.txt" 2>&1
  rc=$?
  echo "== $name rc=$rc seconds=$(( $(date +%s) - start ))" | tee -a "$W/summary.txt"
  tail -n 25 "$W/$name/log.txt"
done
# Text results only (Inductor caches can be large): files under 8 MiB with these endings.
(cd "$W" && find . -type f \( -name '*.txt' -o -name '*.md' -o -name '*.csv' -o -name '*.json' -o -name '*.jsonl' \
  -o -name '*.png' -o -name '*.log' \) -size -8M -not -path '*/triton/*' -not -path '*/ind*/*' -print0 \
  | tar czf "$OUT/${AH_BATCH_NAME:-batch}.tgz" --null -T -)
cat "$W/summary.txt"
