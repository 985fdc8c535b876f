#!/usr/bin/env bash
# Device check for the GPU sampler (gpu/), on a machine with an NVIDIA GPU and
# driver: builds specprobe and cmd/gpucheck, then runs the sampler against the
# real driver and prints each NVML call's latency, the values read, and how
# often each value really changes (which sets how often it is worth sampling).
#
#   scripts/gpu-check.sh            # every GPU
#   scripts/gpu-check.sh --pid 4242 # the GPUs one process uses
#
# Extra arguments go to gpucheck (--duration, --interval, --gpm-interval, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 # go-nvml needs cgo to dlopen libnvidia-ml.so.1
mkdir -p bin
go build -o bin/specprobe ./cmd/specprobe
go build -o bin/gpucheck ./cmd/gpucheck
if command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=index,name,uuid,driver_version,persistence_mode --format=csv || true
fi
echo
echo "== how often each value changes: sampled every 10ms for 5s (GPM every 200ms)"
./bin/gpucheck --interval 10ms --gpm-interval 200ms --energy-interval 10ms --memory-interval 10ms --duration 5s "$@"
echo
echo "== the default intervals (100ms, energy 100ms, memory 1s, process list 1s, GPM 500ms) for 5s: the NVML call rate specprobe attach makes"
./bin/gpucheck --duration 5s "$@"
echo
echo "== the sampler's tests against go-nvml's mocks on this machine"
go test -count=1 ./gpu/
