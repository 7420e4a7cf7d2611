#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     bash .devbin/int8_ab.sh
# The matrix-vector product with x rounded to 8 bits (integer dot products, launch shapes
# ending in q) against the float one, in one call: the quantized products' GPU tests on
# Vulkan; `qmatvec` (the bench; weights cycled cold) on large square products, a Llama-3-8B
# MLP's and SmolLM2's output projection, in f32 and f16 activations; then the generation
# bench before (`generate-float`: no product rounds x) and after (`generate`) on random
# weights of larger decoders (PRESETS), alternated.
source ${B:-.devbin}/setup.sh
{
echo "== quantized products' GPU tests on Vulkan"
RIDGE_TEST_ADAPTERS=vulkan timeout 240 $B/gpu-tests ${TESTS:-quant decoder} --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "test result" "$W/gpu-tests.txt" | tail -3
grep -A12 "^---- " "$W/gpu-tests.txt" | head -40
L=${LARGE:-256/64/4,256/32/4q,256/16/4q,256/32/8q,256/32/2q,128/16/4q}
for f16 in "" --f16; do
  echo "== large products $f16"
  timeout 150 $B/qmatvec --sizes 4096,8192 --launch $L $f16 2>&1 | grep -E "×|cycle|one copy"
  echo "== Llama-3-8B MLP $f16"
  timeout 150 $B/qmatvec --shapes 14336x4096,4096x14336 --launch $L $f16 2>&1 | grep -E "×"
  echo "== SmolLM2-135M's output projection $f16"
  timeout 100 $B/qmatvec --shapes 49152x576 --launch 128/32/4,128/32/4q,256/32/4q $f16 2>&1 | grep -E "×"
done
for preset in ${PRESETS:-smollm2-1.7b llama-3.2-1b}; do
  for dt in "" --f16; do
    for bin in ${BINS:-generate-float generate}; do
      echo "== $preset: $bin $dt"
      timeout 150 $B/$bin --random-weights --preset $preset $dt --tokens 32 --prompts 128 --contexts 128 2>&1 | grep -E "tokens/s|qmatvec|total|on NVIDIA"
    done
  done
done
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$W/gpu-tests.txt" "$OUT/" 2>/dev/null
true
