#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     bash .devbin/fused_ab.sh
# Issue 25's fused decode attention block (`generate --fused-attention`: a layer's norm, Q/K/V,
# RoPE, cache append, attention and O projection in one dispatch) against the unfused kernels
# of the same binary, alternated twice in f32 and once in f16, decode after 128 and at 440
# tokens (the block takes up to 512 keys); its GPU tests first, then its kind swept
# (`ridge bench --op decode_attention`) beside the three it replaces. The most telling first:
# a call may be cut short.
source ${B:-.devbin}/setup.sh
run() { timeout 60 $B/generate --random-weights --tokens 64 --prompts 128 --contexts 128,440 "$@" 2>&1 | grep -E "^tg64|GPU's own|per layer|^    [a-z_]+ +[0-9]+ dispatch"; }
{
echo "== GPU tests"
RIDGE_TEST_ADAPTERS=vulkan timeout 100 $B/gpu-tests decode_block decoder --test-threads 2 2>&1 | grep -E "test result|FAILED|panicked" | head
for round in 1 2; do
  echo "== round $round: unfused, f32"; run
  echo "== round $round: fused, f32"; run --fused-attention
done
echo "== unfused, f16"; run --f16
echo "== fused, f16"; run --f16 --fused-attention
echo "== the kinds"
timeout 120 $B/ridge bench --op decode_attention,kv_attention,rms_qmatvec_rope,qmatvec --repeats 20 2>&1 | sed -n '/calibrated per-op model/,$p'
} 2>&1 | tee "$OUT/log.txt"
true
