#!/usr/bin/env bash
# Real-model mm inputs (timm + transformers from configs, random weights; training with bf16 autocast and
# bf16 inference) through the plugin's collector. Writes $OUT/h200_{timm,hf}_{train,infer}_mm.txt.
# Resumable (journal $OUT/h200.progress.jsonl, copied back from datasets/h200/ if present).
# Expected wall time: MINUTES + ~1 minute.
#
#   MINUTES=8 SUITES=timm,hf MODES=train,infer bash gpu_jobs/datagen_models.sh
#
# WAY=gemms: time each distinct GEMM of the cases once, with gen_data_mm --shapes (two workers per GPU,
# default max-autotune's candidates as above), MINUTES shared between the lists. The lists are GEMM_LISTS
# (space-separated *_gemms.csv files) or, by default, the committed datasets/h200/h200_<suite>_<mode>_gemms.csv
# of the SUITES x MODES pairs that have cases (MODES defaults to train,decode here: every inference GEMM is
# also a training one). A list that is missing is made here first with torchgen_ah.model_gemms (seconds; a
# case that cannot run on meta runs eagerly on the GPU). Each list's log resumes from RESUME_DIR: its rows
# there (GEMMs already logged are skipped, by key; a committed .gz is decompressed) and its journal are
# copied into $OUT first, so the returned log is the whole file: compress it over the one in datasets/h200/
# with `python -m torchgen_ah.merge_data --force datasets/h200/NAME.gz NAME` and copy its journal (docs/datagen.md).
set -euo pipefail
: "${OUT:?set OUT to the output folder}"
MINUTES="${MINUTES:-8}"
SUITES="${SUITES:-timm,hf}"
if [ "${WAY:-compile}" = gemms ]; then MODES="${MODES:-train,decode}"; else MODES="${MODES:-train,infer}"; fi
TIMEOUT="${TIMEOUT:-300}"
NUM_GPUS="${NUM_GPUS:-$( (nvidia-smi -L 2>/dev/null || true) | wc -l)}"
[ "$NUM_GPUS" -ge 1 ] || NUM_GPUS=1
RESUME_DIR="${RESUME_DIR:-datasets/h200}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
. "$(dirname "$0")/resume_lib.sh"

mkdir -p "$OUT"
python3 -c 'import torch, triton, timm, transformers, json; print(json.dumps({"torch": torch.__version__, "triton": triton.__version__, "timm": timm.__version__, "transformers": transformers.__version__, "gpu": torch.cuda.get_device_name(0)}))' > "$OUT/environment_models.json" || true

if [ "${WAY:-compile}" = gemms ]; then
  lists=()
  if [ -n "${GEMM_LISTS:-}" ]; then
    read -r -a lists <<< "$GEMM_LISTS"
  else  # the (suite, mode) pairs that have cases (no timm decode)
    for pair in $(python3 -c "import sys; from torchgen_ah.datagen.model_shapes import all_cases
print(' '.join(sorted({c['suite'] + '_' + c['mode'] for c in all_cases(tuple(sys.argv[1].split(',')), tuple(sys.argv[2].split(',')))})))" "$SUITES" "$MODES"); do
      lists+=("$RESUME_DIR/h200_${pair}_gemms.csv")
    done
  fi
  [ "${#lists[@]}" -gt 0 ] || { echo "no GEMM lists for SUITES=$SUITES MODES=$MODES GEMM_LISTS=${GEMM_LISTS:-}"; exit 1; }
  for list in "${lists[@]}"; do
    case "$list" in *_gemms.csv) ;; *) echo "GEMM list $list: the name must end in _gemms.csv"; exit 1 ;; esac
  done
  missing=0
  for list in "${lists[@]}"; do [ -f "$list" ] || missing=1; done
  if [ "$missing" = 1 ]; then  # list every case here (the GPU machine's timm and transformers)
    python3 -m torchgen_ah.model_gemms -o "$OUT/h200" --suites "$SUITES" --modes "$MODES" --device meta,cuda \
      --no-progress > "$OUT/gemms_list.txt" 2>&1 || true
    cat "$OUT/gemms_list.txt"
    for i in "${!lists[@]}"; do
      [ -f "${lists[$i]}" ] || lists[$i]="$OUT/$(basename "${lists[$i]}")"
    done
  fi
  share=$(python3 -c "print(round(max(0.5, ($MINUTES - 0.5) / ${#lists[@]}), 2))")
  for list in "${lists[@]}"; do
    [ -f "$list" ] || { echo "no GEMM list $list (see $OUT/gemms_list.txt)"; continue; }
    name=$(basename "${list%_gemms.csv}")_mm.txt
    log="$OUT/$name"
    resume_copy "$RESUME_DIR/$name" "$log"
    python3 -m torchgen_ah.mm.gen_data_mm --shapes "$list" -o "$log" --num-reps 2 --search-space default \
      --batch-size 2 --num-gpus "$NUM_GPUS" --workers-per-gpu 2 \
      --timeout-per-sample 120 --max-minutes "$share" --stop-grace-seconds 20 --no-progress \
      > "$log.stderr.txt" 2>&1 || true
    tail -n 1 "$log.stderr.txt"
    echo "command: gen_data_mm --shapes $list -o $name --num-reps 2 --search-space default --batch-size 2 --num-gpus $NUM_GPUS --workers-per-gpu 2 --timeout-per-sample 120 --max-minutes $share --stop-grace-seconds 20" >> "$OUT/command_models.txt"
  done
  ls -la "$OUT"
  exit 0
fi
for f in "$RESUME_DIR"/h200_timm_*_mm.txt "$RESUME_DIR"/h200_timm_*_mm.txt.gz "$RESUME_DIR"/h200_hf_*_mm.txt \
         "$RESUME_DIR"/h200_hf_*_mm.txt.gz; do
  [ -f "$f" ] && resume_copy "$f" "$OUT/$(basename "${f%.gz}")"
done
[ -f "$RESUME_DIR/h200.progress.jsonl" ] && [ ! -f "$OUT/h200.progress.jsonl" ] && cp "$RESUME_DIR/h200.progress.jsonl" "$OUT/"
python3 -m torchgen_ah.model_shapes -o "$OUT/h200" --suites "$SUITES" --modes "$MODES" \
  --num-gpus "$NUM_GPUS" --timeout-per-sample "$TIMEOUT" --max-minutes "$MINUTES" --stop-grace-seconds 20 \
  --no-progress 2>&1 | tail -n 200 > "$OUT/models_stderr.txt"
echo "command: python3 -m torchgen_ah.model_shapes -o h200 --suites $SUITES --modes $MODES --num-gpus $NUM_GPUS --timeout-per-sample $TIMEOUT --max-minutes $MINUTES" > "$OUT/command_models.txt"
tar czf "$OUT/h200.workers.tar.gz" -C "$OUT" h200.workers && rm -rf "$OUT/h200.workers"
tail -n 3 "$OUT/models_stderr.txt"
ls -la "$OUT"
