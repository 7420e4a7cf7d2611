#!/usr/bin/env bash
# Ridge, llama.cpp's Vulkan backend and PyTorch on SmolLM2-135M, in one call on the GPU
# machine (issue 25's ratios). prepare.sh fills .devbin (generate, random_gguf.py,
# smollm2_torch.py, setup.sh …); for llama.cpp add by hand: llama-bench (xz-compressed, as
# prepare.sh packs the others, to stay within a call's 64 MiB; built per
# ../shared/device/llama-cpp.md), llama.cpp's gguf-py/, the real GGUF's metadata as
# smollm2_meta.json (gguf_meta.py), and optionally generate-old (the bench before a change);
# then one `run` call with carry [".gl", ".devbin"]:  bash .devbin/peers.sh
# Every program runs the same random-weight GGUF of SmolLM2's exact shape and formats
# (PyTorch: transformers' LlamaForCausalLM of the same configuration, random f16/f32 weights).
# Without llama-bench in .devbin, Ridge runs its own random weights of that shape
# (`--random-weights`) beside PyTorch. TORCH_S bounds PyTorch's time (its compiled decode
# comes last).
source ${B:-.devbin}/setup.sh
{
model=--random-weights
if [ -x $B/llama-bench ]; then
  PYTHONPATH=$B/gguf-py python3 $B/random_gguf.py $B/smollm2_meta.json $W/smollm2.gguf
  ls -l $W/smollm2.gguf
  model="--gguf $W/smollm2.gguf"
  echo "== llama.cpp (Vulkan), flash attention on"
  timeout 150 $B/llama-bench -m $W/smollm2.gguf -ngl 99 -fa 1 -p 128,1024 -n 128 -r 5 2>&1 | grep -E "^\||error|Vulkan"
  timeout 100 $B/llama-bench -m $W/smollm2.gguf -ngl 99 -fa 1 -p 0 -n 128 -d 4096 -r 3 2>&1 | grep -E "^\||error"
else
  echo "== llama.cpp: no llama-bench in $B, skipped"
fi
for bin in ${BINS:-generate-old generate}; do
  [ -x $B/$bin ] || continue
  for dt in "" --f16; do
    echo "== Ridge: $bin $dt"
    args=$model
    [ $bin = generate-old ] && args=--random-weights
    timeout 120 $B/$bin $args $dt --tokens 128 --prompts 128,1024 --contexts 128,4096 2>&1
  done
done
echo "== PyTorch (transformers, static cache: eager, CUDA graph, compiled)"
timeout ${TORCH_S:-150} python3 $B/smollm2_torch.py 2>&1 | grep -v Warning
} 2>&1 | tee "$W/log.txt"
cp "$W/log.txt" "$OUT/" 2>/dev/null
true
