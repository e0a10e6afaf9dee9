#!/usr/bin/env bash
# int8 GEMMs' loop on one GPU, in one device call (run from the repository root on the device machine):
#   1. collect: the int8 projections of quantized decoders (torchgen_ah/data/int8_model_shapes.csv), then
#      sampled int8 inputs for the time left (gen_data_mm --dtypes int8, logged as op int_mm), GEN_S seconds;
#   2. train: an H200 ranking from the log (train_generic), $OUT/artifacts/_IntMMRankingH200.py;
#   3. judge: off, default, fast and quality on the map's int_mm shapes (none of them collected above), in one
#      process with the new artifact (torchgen_ah.evaluation.studies.family_modes), MODES_S seconds.
# Everything lands in $OUT: int_mm_models.txt and int_mm_sampled.txt (the logs, for datasets/h200_int_mm/), the
# artifact, modes_int_mm.jsonl and family_modes.md. GEN_S (330) and MODES_S (180) bound the steps.
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1 || export PYTHONPATH=$PWD
GEN_S=${GEN_S:-330}
half=$(python3 -c "print(max(0.5, (${GEN_S} / 2 - 30) / 60))")
timeout -k 5 $(( GEN_S / 2 )) python3 -m torchgen_ah.mm.gen_data_mm --dtypes int8 -o "$OUT/int_mm_models.txt" --num-reps 1 \
  --shapes torchgen_ah/data/int8_model_shapes.csv --max-minutes "$half" --no-progress > "$OUT/collect_models.log" 2>&1
timeout -k 5 $(( GEN_S / 2 )) python3 -m torchgen_ah.mm.gen_data_mm --dtypes int8 -o "$OUT/int_mm_sampled.txt" --num-reps 1 \
  --num-samples 400 --max-minutes "$half" --no-progress > "$OUT/collect_sampled.log" 2>&1
tail -3 "$OUT/collect_models.log" "$OUT/collect_sampled.log"
mkdir -p "$OUT/artifacts"
logs=$(ls "$OUT"/int_mm_models.txt "$OUT"/int_mm_sampled.txt 2>/dev/null)
timeout -k 5 120 python3 -m torchgen_ah.train_generic $logs --heuristic-name IntMMRankingH200 \
  --device-name "NVIDIA H200" --out "$OUT/artifacts" 2>&1 | tee "$OUT/train.log"
timeout -k 5 "${MODES_S:-180}" python3 -m torchgen_ah.evaluation.studies.family_modes --out "$OUT" \
  --families int_mm --artifact-dir "$OUT/artifacts" --budget-s "$(( ${MODES_S:-180} - 40 ))" 2>&1 \
  | tee "$OUT/family_modes.md"
