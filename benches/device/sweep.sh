#!/usr/bin/env bash
# Runs on the GPU machine (one `run` call): correctness on the H200, Ridge's sweeps, the
# PyTorch references, then the ratio table. Everything lands in $OUT as well.
set -uo pipefail
source .devbin/gpu-env.sh
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=.devbin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
$B/ridge info --json > "$OUT/info.json"; $B/ridge info | head -14
echo "== GPU tests (all but the ones needing the real MiniLM files)"
$B/gpu-tests --skip minilm 2>&1 | tail -5 | tee "$OUT/gpu-tests.txt"
echo "== kernel suite"
$B/ridge check --repeats 20 --json > "$OUT/check.json"; $B/ridge check --repeats 20 2>&1 | tail -24
echo "== bench"
$B/ridge bench --size full --repeats 20 --json "$OUT/bench.json" --svg "$OUT/roofline.svg" > "$OUT/bench.txt" 2>&1; tail -40 "$OUT/bench.txt"
echo "== GEMM candidates"
$B/gemm --sizes 1024,4096 2>&1 | tee "$OUT/gemm.txt"
echo "== MiniLM (random weights)"
$B/minilm --random-weights --batches 1,32 2>&1 | tee "$OUT/minilm.txt"
echo "== PyTorch"
python3 $B/torch_ref.py all 2>&1 | tee "$OUT/torch.jsonl"
python3 $B/minilm_torch.py 2>&1 | tee -a "$OUT/torch.jsonl"
echo "== ratios"
python3 $B/ratios.py "$OUT"
