#!/usr/bin/env bash
# Side-by-side evaluation on one GPU (issue 6): timing table + policy scores, compile cost, end to end.
# Run from the repository root on the GPU machine:  OUT=/some/dir bash gpu_jobs/evaluate_gpu.sh
# Resumable: with EVAL_FROM=<a previous $OUT/evaluate> the shapes already timed there are kept and only the
# rest (including those a time budget skipped) are timed. On a multi-GPU host the shapes are dealt to one
# timing worker per GPU.
# Budget: about 8 minutes in all (timing 4.5, compile cost 2, end to end 1.5); each part stops starting
# new work when its budget is spent and reports what it skipped. Results land under $OUT; the report
# section is written to $OUT/RESULTS.md (copy it into benchmarks/RESULTS.md between the evaluate_gpu markers).
set -u
OUT=${OUT:-$PWD/eval_gpu_out}
TIMING_MIN=${TIMING_MIN:-4.5}
COST_MIN=${COST_MIN:-2}
E2E_MIN=${E2E_MIN:-1.5}
WORKERS=${WORKERS:-$(nvidia-smi -L 2>/dev/null | wc -l)}  # timing workers, one per GPU
[ "$WORKERS" -ge 1 ] 2>/dev/null || WORKERS=1
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
[ -n "${EVAL_FROM:-}" ] && [ -d "$EVAL_FROM" ] && [ ! -d "$OUT/evaluate" ] && cp -r "$EVAL_FROM" "$OUT/evaluate"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/gpu.txt" 2>&1 || true

python -m torchgen_ah.compile_cost torchgen_ah/data/eval_shapes.csv --out "$OUT/compile_cost" \
    --shapes 3 --max-minutes "$COST_MIN" 2>&1 | tail -30
python -m torchgen_ah.e2e_models --out "$OUT/e2e" --models gpt2,vit \
    --modes off,default,ours_adaptive --max-minutes "$E2E_MIN" 2>&1 | tail -20
python -m torchgen_ah.evaluate torchgen_ah/data/eval_shapes.csv --out "$OUT/evaluate" --reps 3 --workers "$WORKERS" \
    --max-minutes "$TIMING_MIN" --compile-cost "$OUT/compile_cost/compile_cost.json" \
    --e2e "$OUT/e2e/e2e.md" --results "$OUT/RESULTS.md" 2>&1 | tail -80
# keep the small, readable outputs; drop caches and per-mode Triton folders
rm -rf "$OUT"/evaluate/inductor_cache "$OUT"/compile_cost/caches_* "$OUT"/e2e/*/caches_*
