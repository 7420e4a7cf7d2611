#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     bash .devbin/encoder_ab.sh
# An encoder kernel change measured before and after in one call (only same-call ratios
# count). .devbin holds `minilm-old` (the bench built before the change), `minilm` and
# `gpu-tests` (after). The GEMM's GPU tests first (the tensor-core kernel is tested only on an
# adapter that has it; the 60-second tuning sweep skipped), then MiniLM's forward, old and new
# alternated twice (DTYPES: default f16, the tensor cores' path), batches 1 and 32, with its
# GPU time per op.
source ${B:-.devbin}/setup.sh
{
echo "== GEMM GPU tests on Vulkan"
RIDGE_TEST_ADAPTERS=vulkan timeout 200 $B/gpu-tests gemm:: --skip every_tuning_candidate --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "test result" "$W/gpu-tests.txt" | tail -3
grep -A12 "^---- " "$W/gpu-tests.txt" | head -40
for round in 1 2; do
  for bin in minilm-old minilm; do
    for dtype in ${DTYPES:---f16}; do
      echo "== round $round: $bin $dtype"
      timeout 100 $B/$bin --random-weights --batches 1,32 $dtype 2>&1 | grep -E "^batch|^  [a-z_]+ +[0-9]+ dispatch"
    done
  done
done
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$W/gpu-tests.txt" "$OUT/" 2>/dev/null
true
