#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     OPS=kv_attention,kv_attention_split VARIANTS="RIDGE_X=1;RIDGE_Y=2" bash .devbin/kernel_ab.sh
# A kernel change measured before and after in one call (machines differ from call to call:
# only same-call ratios count). .devbin holds `ridge-old` and `generate-old` (built from the
# commit before the change) and `ridge`, `generate` and `gpu-tests` (after). The decoder's GPU
# tests first; then `ridge bench --op $OPS` (f32 and f16 cases) for old, new, and new under
# each of VARIANTS (;-separated environment settings of an experiment), two rounds; then the
# generation bench old and new alternated (decode after 128 and 1024 tokens).
source ${B:-.devbin}/setup.sh
{
echo "== decoder GPU tests on Vulkan"
RIDGE_TEST_ADAPTERS=vulkan timeout 240 $B/gpu-tests decoder --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "test result" "$W/gpu-tests.txt" | tail -3
grep -A12 "^---- " "$W/gpu-tests.txt" | head -40
IFS=';' read -ra variants <<< "${VARIANTS:-}"
for round in 1 2; do
  echo "== round $round: ridge-old bench"
  timeout 120 $B/ridge-old bench --op "$OPS" --repeats 20 2>&1 | grep -E "^ *(op|${OPS//,/|})"
  echo "== round $round: ridge bench"
  timeout 120 $B/ridge bench --op "$OPS" --repeats 20 2>&1 | grep -E "^ *(op|${OPS//,/|})"
  for v in "${variants[@]}"; do
    echo "== round $round: ridge bench with $v"
    timeout 120 env $v $B/ridge bench --op "$OPS" --repeats 20 2>&1 | grep -E "^ *(op|${OPS//,/|})"
  done
done
for round in 1 2; do
  for bin in generate-old generate; do
    echo "== round $round: $bin, f32"
    timeout 100 $B/$bin --random-weights --tokens 64 --prompts ${PROMPTS:-128,1024} 2>&1 | grep -v "^  *[a-z_]* .*µs"
  done
done
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$W/gpu-tests.txt" "$OUT/" 2>/dev/null
true
