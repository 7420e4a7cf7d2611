#!/usr/bin/env bash
# Run here (not on the GPU machine), from the project root: builds Ridge's release binaries
# and puts them, stripped and compressed, with the scripts the GPU machine needs, into
# .devbin/ (ignored by git). Then one `run` call with carry [".gl", ".devbin"] and the command
#     bash .devbin/sweep.sh
# measures everything in one go (see sweep.sh) and prints the ratio table last.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -d .gl ] || bash ../shared/device/prep.sh
mkdir -p .devbin
cp ../shared/device/gpu-env.sh ../shared/device/torch_ref.py .devbin/
cargo build --release -p ridge-cli
cargo build --release --benches
cargo test --release --test gpu --no-run 2>&1 | tee /tmp/ridge-gpu-test-build.log
gpu_test=$(grep -o 'target/release/deps/gpu-[0-9a-f]*' /tmp/ridge-gpu-test-build.log | tail -1)
cp target/release/ridge .devbin/ridge
cp "$(ls -t target/release/deps/minilm-* | grep -v '\.d$' | head -1)" .devbin/minilm
cp "$(ls -t target/release/deps/gemm-* | grep -v '\.d$' | head -1)" .devbin/gemm
cp "$(ls -t target/release/deps/attention-* | grep -v '\.d$' | head -1)" .devbin/attention
cp "$(ls -t target/release/deps/transpose-* | grep -v '\.d$' | head -1)" .devbin/transpose
cp "$(ls -t target/release/deps/registers-* | grep -v '\.d$' | head -1)" .devbin/registers
cp "$(ls -t target/release/deps/generate-* | grep -v '\.d$' | head -1)" .devbin/generate
cp "$(ls -t target/release/deps/qmatvec-* | grep -v '\.d$' | head -1)" .devbin/qmatvec
cp "$gpu_test" .devbin/gpu-tests
bins=".devbin/ridge .devbin/minilm .devbin/gemm .devbin/attention .devbin/transpose .devbin/registers .devbin/generate .devbin/qmatvec .devbin/gpu-tests"
strip $bins
# A call carries 64 MiB: the binaries travel xz-compressed (~4× smaller; setup.sh unpacks
# them there), which leaves room for llama-bench (38 MB stripped) beside them.
xz -T2 -6 -f $bins
cp benches/device/sweep.sh benches/device/decode.sh benches/device/decode_ab.sh benches/device/peers.sh benches/device/encoder.sh benches/device/encoder_ab.sh benches/device/calibration.sh benches/device/kernel_ab.sh benches/device/repeat.sh benches/device/int8_ab.sh benches/device/fused_ab.sh \
  benches/device/setup.sh benches/device/smollm2_torch.py benches/device/minilm_torch.py \
  benches/device/ratios.py ../shared/device/random_gguf.py .devbin/
du -sh .devbin .gl
