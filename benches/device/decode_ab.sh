#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     bash .devbin/decode_ab.sh
# A before/after comparison in one call (machines differ from call to call by up to 25 % on
# decode: only same-call ratios count). .devbin holds `generate-old` (the bench built from the
# commit before the change) and `generate` (after), `qmatvec-old` and `qmatvec` likewise, and
# `gpu-tests` (after). The decoder's GPU tests first, then old and new alternated twice (BINS:
# the generation benches to alternate, default "generate-old generate"; an experiment's
# variants built as generate-NAME), each in f32, then in f16.
source ${B:-.devbin}/setup.sh
{
echo "== decoder GPU tests on Vulkan"
RIDGE_TEST_ADAPTERS=vulkan timeout 240 $B/gpu-tests ${TESTS:-quant decoder core} --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "test result" "$W/gpu-tests.txt" | tail -3
grep -A12 "^---- " "$W/gpu-tests.txt" | head -40
for round in 1 2; do
  for bin in ${BINS:-generate-old generate}; do
    echo "== round $round: $bin, f32"
    timeout 100 $B/$bin --random-weights --tokens 64 --prompts ${PROMPTS:-128,1024} 2>&1
  done
done
for bin in ${BINS:-generate-old generate}; do
  echo "== $bin, f16"
  timeout 100 $B/$bin --random-weights --tokens 64 --prompts ${PROMPTS:-128,1024} --f16 2>&1
done
for bin in qmatvec-old qmatvec; do
  [ -x $B/$bin ] && { echo "== $bin"; timeout 60 $B/$bin 2>&1 | tail -20; }
done
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$W/gpu-tests.txt" "$OUT/" 2>/dev/null
true
