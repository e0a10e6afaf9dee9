#!/usr/bin/env bash
# The map of where autotuning pays, on one GPU (run from the repository root on the device machine):
# each family of FAMILIES in a fresh process of its own, BUDGET_S seconds each (workloads that would not fit
# are listed as not measured), rows in $OUT/<family>.jsonl and the report in $OUT/autotune_map.md.
#   FAMILIES=flex_attention,flex_decoding BUDGET_S=150 bash gpu_jobs/autotune_map.sh
# The whole map (8 families) takes longer than one 10-minute device call: split FAMILIES over two calls and
# report on both calls' files with `python -m torchgen_ah.evaluation.studies.autotune_map --report ...`.
set -u
: "${OUT:?set OUT to the output folder}"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.txt" 2>&1 || export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/device.txt"
timeout -k 5 "${MAP_S:-585}" python3 -m torchgen_ah.evaluation.studies.autotune_map --out "$OUT" \
  --families "${FAMILIES:-flex_attention,flex_decoding,flex_attention_backward,scaled_mm}" \
  --budget-s "${BUDGET_S:-130}" --rounds "${ROUNDS:-5}" --only "${ONLY:-}" 2>&1 | tee "$OUT/autotune_map.md"
