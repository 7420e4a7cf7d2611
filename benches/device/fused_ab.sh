#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"]:
#     bash .devbin/fused_ab.sh
# Issue 25's fused decode attention block (`generate --fused-attention`: a layer's norm, Q/K/V,
# RoPE, cache append, attention and O projection in one dispatch) against the unfused kernels
# of the same binary, alternated twice in f32 and once in f16, decode after 128, at 440 (one
# pass: up to 512 keys) and at 4096 tokens (the block's spans and their merge); then its kinds
# swept (`ridge bench --op decode_attention,decode_attention_split`) beside those they
# replace, then its GPU tests. The most telling first: a call may be cut short.
source ${B:-.devbin}/setup.sh
run() { timeout 75 $B/generate --random-weights --tokens 64 --prompts 128 --contexts 128,440,4096 "$@" 2>&1 | grep -E "^tg64|GPU's own|per layer|^    [a-z_]+ +[0-9]+ dispatch"; }
{
for round in 1 2; do
  echo "== round $round: unfused, f32"; run
  echo "== round $round: fused, f32"; run --fused-attention
done
echo "== unfused, f16"; run --f16
echo "== fused, f16"; run --f16 --fused-attention
echo "== the kinds"
timeout 120 $B/ridge bench --op decode_attention,decode_attention_split,kv_attention,kv_attention_split,rms_qmatvec_rope,qmatvec --repeats 20 2>&1 | sed -n '/calibrated per-op model/,$p'
echo "== GPU tests"
RIDGE_TEST_ADAPTERS=vulkan timeout 100 $B/gpu-tests decode_block decoder --test-threads 4 2>&1 | grep -E "test result|FAILED|panicked" | head
} 2>&1 | tee "$OUT/log.txt"
true
