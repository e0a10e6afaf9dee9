#!/usr/bin/env bash
# One GEMM family's loop on one GPU, in one device call (run from the repository root on the device machine):
#   FAMILY=int_mm bash gpu_jobs/family_loop.sh       int8 GEMMs (torch._int_mm)
#   FAMILY=grouped_mm bash gpu_jobs/family_loop.sh   a mixture of experts' grouped GEMMs (torch._grouped_mm)
#   1. collect, GEN_S seconds: int_mm: the projections of quantized decoders (torchgen_ah/data/int8_model_shapes.csv)
#      then sampled int8 inputs (gen_data_mm --dtypes int8); grouped_mm: real MoE models' expert projections then
#      sampled ones (torchgen_ah.moe.gen_data_grouped_mm). Logs $OUT/<family>_*.txt, for datasets/h200_<family>/;
#   2. train: a ranking for this GPU from the logs (train_generic), $OUT/artifacts/_<Name><GPU>.py (H200, H100, ...);
#   3. judge, MODES_S seconds: off, default, fast and quality on the map's shapes of the family (none collected
#      above), in one process, with the new artifact (torchgen_ah.evaluation.studies.family_modes):
#      modes_<family>.jsonl and family_modes.md.
# GEN_S (270) and MODES_S (220) bound the steps; the whole call stays under 10 minutes.
# The device call returns at most 8 files: the steps write into a work folder, packed at the end (also when a
# step fails or the call is cut short) into $OUT/family_<family>.tgz; family_modes.md and train.log are
# copied beside it.
set -u
: "${OUT:?set OUT to the output folder}"
: "${FAMILY:?set FAMILY to int_mm or grouped_mm}"
export PYTHONUNBUFFERED=1
FINAL_OUT=$OUT
OUT=$(mktemp -d /tmp/family_loop.XXXXXX)
pack() {
  rm -rf "$OUT"/*.workers
  tar -czf "$FINAL_OUT/family_$FAMILY.tgz" --exclude="caches_*" --exclude="*cache*" -C "$OUT" . 2>/dev/null
  cp "$OUT/family_modes.md" "$OUT/train.log" "$FINAL_OUT/" 2>/dev/null
}
trap pack EXIT
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1 || export PYTHONPATH=$PWD
GEN_S=${GEN_S:-270}
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)  # e.g. "NVIDIA H200"
GPU_TAG=$(echo "$GPU_NAME" | grep -oE '[A-Z][0-9]{2,4}' | head -1)
half=$(python3 -c "print(max(0.5, (${GEN_S} / 2 - 30) / 60))")
case "$FAMILY" in
  int_mm)
    NAME=IntMMRanking$GPU_TAG
    timeout -k 5 $(( GEN_S / 2 )) python3 -m torchgen_ah.mm.gen_data_mm --dtypes int8 -o "$OUT/int_mm_models.txt" \
      --num-reps 1 --shapes torchgen_ah/data/int8_model_shapes.csv --max-minutes "$half" --no-progress \
      > "$OUT/collect_models.log" 2>&1
    timeout -k 5 $(( GEN_S / 2 )) python3 -m torchgen_ah.mm.gen_data_mm --dtypes int8 -o "$OUT/int_mm_sampled.txt" \
      --num-reps 1 --num-samples 400 --max-minutes "$half" --no-progress > "$OUT/collect_sampled.log" 2>&1 ;;
  grouped_mm)
    NAME=GroupedMMRanking$GPU_TAG
    timeout -k 5 "$GEN_S" python3 -m torchgen_ah.moe.gen_data_grouped_mm -o "$OUT/grouped_mm_models.txt" \
      --num-reps 1 --num-samples 300 --max-minutes "$(python3 -c "print(max(0.5, (${GEN_S} - 40) / 60))")" \
      --no-progress > "$OUT/collect_models.log" 2>&1 ;;
  *) echo "FAMILY: int_mm or grouped_mm, not $FAMILY" >&2; exit 2 ;;
esac
tail -n 3 "$OUT"/collect_*.log
mkdir -p "$OUT/artifacts"
logs=$(ls "$OUT/$FAMILY"_*.txt 2>/dev/null)
timeout -k 5 60 python3 -m torchgen_ah.train_generic $logs --heuristic-name "$NAME" \
  --device-name "$GPU_NAME" --out "$OUT/artifacts" 2>&1 | tee "$OUT/train.log"
timeout -k 5 "${MODES_S:-220}" python3 -m torchgen_ah.evaluation.studies.family_modes --out "$OUT" \
  --families "$FAMILY" --artifact-dir "$OUT/artifacts" --budget-s "$(( ${MODES_S:-220} - 40 ))" \
  > "$OUT/family_modes_run.log" 2>&1
# the report from whatever rows were written, also where the run above was cut short
python3 -m torchgen_ah.evaluation.studies.family_modes --report "$OUT/modes_$FAMILY.jsonl" \
  --command "FAMILY=$FAMILY bash gpu_jobs/family_loop.sh" 2>&1 | tee "$OUT/family_modes.md"
