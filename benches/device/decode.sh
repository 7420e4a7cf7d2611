#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"] (prepare.sh fills .devbin):
#     bash .devbin/decode.sh
# The decoder's kernels and model on the GPU (GPU tests of the quantized products, RoPE,
# KV attention, argmax and the random-weight decoder), then the generation bench on a
# SmolLM2-shaped GGUF with random weights (the real file does not travel), f32 and f16.
set -uo pipefail
source ${B:-.devbin}/gpu-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ridge-work; mkdir -p "$W"
export RIDGE_CACHE_DIR=$W/cache
B=${B:-.devbin}
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
echo "== decoder GPU tests on Vulkan"
RIDGE_TEST_ADAPTERS=vulkan timeout 300 $B/gpu-tests quant decoder --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "^test |test result" "$W/gpu-tests.txt" | tail -12
grep -A12 "^---- " "$W/gpu-tests.txt" | head -40
echo "== generation bench, f32"
timeout 240 $B/generate --random-weights --tokens 64 2>&1
echo "== generation bench, f16"
timeout 240 $B/generate --random-weights --tokens 64 --f16 2>&1
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$W/gpu-tests.txt" "$OUT/" 2>/dev/null
true
