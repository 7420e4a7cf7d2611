# Sourced by the device scripts (from .devbin, where prepare.sh copies it): the Vulkan
# loader pointed at the NVIDIA driver (gpu-env.sh), the packed binaries unpacked, $OUT for
# files to bring back, a work folder $W with Ridge's cache in it, and the GPU's clocks
# printed for the record.
set -uo pipefail
B=${B:-.devbin}
source $B/gpu-env.sh
# Binaries packed by prepare.sh travel xz-compressed: unpack any not yet unpacked.
for f in $B/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/ridge-work; mkdir -p "$W"
export RIDGE_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
