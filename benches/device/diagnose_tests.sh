#!/usr/bin/env bash
# Runs on the GPU machine: every GPU test alone with a 25 s limit, to find one that hangs.
source .devbin/gpu-env.sh
export RIDGE_TEST_ADAPTERS=${RIDGE_TEST_ADAPTERS:-vulkan}
for t in $(.devbin/gpu-tests --list --format terse 2>/dev/null | grep ': test$' | sed 's/: test$//' | grep -v minilm); do
  start=$(date +%s.%N)
  timeout 25 .devbin/gpu-tests --exact "$t" > /tmp/t.log 2>&1; rc=$?
  printf '%-70s rc=%s %.1fs\n' "$t" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)"
  [ "$rc" != 0 ] && grep -E "panicked|error|FAILED" /tmp/t.log | head -5
done
