#!/usr/bin/env bash
# Env: SKIP_TESTS=1 skips the GPU tests; SKIP_TUNING=1 skips GEMM candidates and the autotuner; TUNE_OPS=a,b tunes only those
# ops (GEMM candidates run when gemm is among them); TORCH_OPS limits the PyTorch reference.
# Runs on the GPU machine in one `run` call: correctness on the GPU (GPU tests, kernel
# suite), Ridge's sweeps (bench, attention splits, transpose tilings, GEMM candidates,
# autotuner, MiniLM), the PyTorch references,
# then the ratio table. Files come back in $OUT.
set -uo pipefail
source .devbin/gpu-env.sh
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ridge-work; mkdir -p "$W"
export RIDGE_CACHE_DIR=$W/cache
B=.devbin
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
$B/ridge info | head -16
if [ -z "${SKIP_TESTS:-}" ]; then
echo "== GPU tests on Vulkan (all but those needing the real MiniLM files)"
RIDGE_TEST_ADAPTERS=vulkan timeout 300 $B/gpu-tests --skip minilm --test-threads 2 > "$W/gpu-tests.txt" 2>&1
echo "exit $?"; grep -E "^test |test result|running for over" "$W/gpu-tests.txt" | grep -v " ok$" | tail -30
grep -A12 "^---- " "$W/gpu-tests.txt" | head -60
fi
echo "== kernel suite"
$B/ridge check --repeats 20 --json > "$W/check.json"; $B/ridge check --repeats 20 2>&1 | tail -26
echo "== bench"
# The GPU's clocks and throttle reasons while the bench runs (rows of one call have been
# seen to run exactly 4x slower in a window: the log tells clocks from code).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 250 > "$W/clocks.csv" 2>&1 &
SMI=$!
$B/ridge bench --size full --repeats 20 --json "$W/bench.json" --svg "$W/roofline.svg" 2>&1 | tail -45
kill $SMI 2>/dev/null
python3 - "$W/clocks.csv" <<'PY'
import sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
sm = [int(r[1].split()[0]) for r in rows if r[1].split()[0].isdigit()]
reasons = sorted({r[5] for r in rows})
if sm:
    print(f"clocks during the bench: {len(sm)} samples, SM {min(sm)}-{max(sm)} MHz, "
          f"below 1000 MHz in {sum(c < 1000 for c in sm)}; event reasons {reasons}")
PY
echo "== attention work splitting"
timeout 200 $B/attention --sizes 1024,2048,4096,8192 2>&1
echo "== transpose tilings"
timeout 120 $B/transpose 2>&1
if [ -z "${SKIP_TUNING:-}" ]; then
case ",${TUNE_OPS:-gemm}," in *,gemm,*)
echo "== GEMM candidates"
timeout 200 $B/gemm --sizes 1024,4096 2>&1 | tee "$W/gemm.txt";;
esac
echo "== compiled GEMM candidates (registers, spills, workgroup memory: $W/registers.txt)"
timeout 120 $B/registers > "$W/registers.txt" 2>&1; grep -c "Register Count" "$W/registers.txt"
echo "== autotuner (${TUNE_OPS:-every op})"
timeout 200 $B/ridge tune ${TUNE_OPS:+--op "$TUNE_OPS"} --budget 150s --repeats 5 2>&1 | tail -22
cp "$W"/cache/tuning/*.json "$W/tuning.json" 2>/dev/null
fi
echo "== MiniLM (random weights)"
$B/minilm --random-weights --batches 1,32 2>&1 | tee "$W/minilm.txt"
$B/minilm --random-weights --batches 1,32 --f16 2>&1 | tee -a "$W/minilm.txt"
echo "== PyTorch"
python3 $B/torch_ref.py ${TORCH_OPS:-all} 2>&1 | tee "$W/torch.jsonl"
python3 $B/minilm_torch.py 2>&1 | tee -a "$W/torch.jsonl"
echo "== ratios"
python3 $B/ratios.py "$W"
} 2>&1 | tee "$W/log.txt"
# At most 8 files come back.
cp "$W/log.txt" "$W/clocks.csv" "$W/bench.json" "$W/torch.jsonl" "$W/tuning.json" "$W/check.json" "$W/gemm.txt" "$W/minilm.txt" "$OUT/" 2>/dev/null
true
