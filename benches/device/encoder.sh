#!/usr/bin/env bash
# On the GPU machine, one `run` call with carry [".gl", ".devbin"] (prepare.sh fills .devbin):
#     bash .devbin/encoder.sh
# The encoder's report and, in the same call, what it is held against (issue 26): every
# encoder kind swept in f32 and f16 ($OUT/h200.json and its roofline plot, what
# benches/reports/h200.json ships), MiniLM's products in each layout and epilogue with the
# tuned kernel (the gemm bench's last lines: NN, NT, NT + bias, NT + bias + GELU), and
# MiniLM's forward priced by the report, dispatch by dispatch, f32 and f16.
source ${B:-.devbin}/setup.sh
{
ENCODER_OPS=gemm,linear,linear_residual,linear_gelu,layer_norm,rms_norm,softmax,gelu,add,attention,sparse_attention,transpose,nchw_to_nhwc,nhwc_to_nchw
echo "== encoder kinds"
timeout 300 $B/ridge bench --op $ENCODER_OPS --repeats 20 --json "$OUT/h200.json" --svg "$OUT/h200-roofline.svg" 2>&1 | sed -n '/calibrated per-op model/,$p'
for dtype in "" "--f16"; do
  echo "== MiniLM ${dtype:---f32}"
  timeout 120 $B/minilm --random-weights --batches 1,32 $dtype --report "$OUT/h200.json" 2>&1
done
echo "== layer forms"
timeout 200 $B/gemm --sizes 64 2>&1 | grep -E "tuned|epilogue"
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$OUT/" 2>/dev/null
true
