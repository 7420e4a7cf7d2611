#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"] (prepare.sh fills .devbin):
#     bash .devbin/calibration.sh
# The reports the calibrated model is fitted on and, in the same call, the wall clocks it is
# held against (issue 26): the decoder kinds' sweep ($OUT/$GPU-decoder.json, what `ridge
# predict --report` prices SmolLM2 with; $GPU the card's model in lower case, h100 or h200)
# beside the generation bench (random weights of
# SmolLM2's shape, f32 and f16, prompts of 128, 1024 and 4096 tokens); the encoder kinds'
# sweep in f32 and f16 ($OUT/$GPU-encoder.json) beside MiniLM's bench priced by it
# (ENCODER=0 skips the encoder's half). The larger decoders' shapes (PRESETS, random weights,
# decode after 128 tokens) are priced by the same report: their products from K = 2048 round
# x to 8 bits, the integer kernel's kinds (`…_int8`). FUSED=1 also runs SmolLM2's generation
# bench with the fused decode attention block forced (`--fused-attention`; its kind,
# `decode_attention`, is swept on GPUs either way).
source ${B:-.devbin}/setup.sh
GPU=${GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o 'H[0-9]00' | tr H h)}
GPU=${GPU:-gpu}
{
DECODER_OPS=qmatvec,rms_qmatvec,rms_qmatvec_swiglu,rms_qmatvec_rope,qmatvec_rows,rms_qmatvec_swiglu_rows,rms_qmatvec_rope_rows,qmatmul,rms_qmatmul_swiglu,rms_qmatmul_rope,kv_attention,kv_attention_prefill,kv_attention_split,decode_attention,decode_attention_split,attention_causal,qmatvec_int8,rms_qmatvec_int8,rms_qmatvec_swiglu_int8,rms_qmatvec_rope_int8,argmax
echo "== decoder kinds"
timeout 360 $B/ridge bench --op $DECODER_OPS --repeats 20 --json "$OUT/$GPU-decoder.json" 2>&1 | sed -n '/calibrated per-op model/,$p'
for dtype in "" "--f16"; do
  for variant in "" ${FUSED:+--fused-attention}; do
    echo "== generate ${dtype:---f32} $variant"
    timeout 120 $B/generate --random-weights --tokens 64 --prompts 128,1024,4096 $dtype $variant --report "$OUT/$GPU-decoder.json" 2>&1
  done
done
for preset in ${PRESETS-smollm2-1.7b llama-3.2-1b}; do
  for dtype in "" "--f16"; do
    echo "== generate $preset ${dtype:---f32}"
    timeout 90 $B/generate --random-weights --preset $preset --tokens 64 --prompts 128 $dtype --report "$OUT/$GPU-decoder.json" 2>&1
  done
done
[ "${ENCODER:-1}" = 0 ] && exit 0
echo "== encoder kinds"
timeout 200 $B/ridge bench --op gemm,linear,linear_residual,linear_gelu,layer_norm,softmax,gelu,add,attention --repeats 20 --json "$OUT/$GPU-encoder.json" 2>&1 | sed -n '/calibrated per-op model/,$p'
for dtype in "" "--f16"; do
  echo "== MiniLM ${dtype:---f32}"
  timeout 120 $B/minilm --random-weights --batches 1,32 $dtype --report "$OUT/$GPU-encoder.json" 2>&1
done
} 2>&1 | tee "$OUT/log.txt"
true
