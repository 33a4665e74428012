#!/usr/bin/env bash
# ddp-doctor bench on one H200: GPU health (bf16/fp16/tf32/fp32 matmul 8192^3, device copy, pinned
# host<->device) and the NCCL sweep of every op with 1 rank, 1 KiB..1 GiB, values checked.
# Writes $OUT/bench/bench.json (the report; tests/bench/test_health.py reads it as
# tests/fixtures/gpu/bench/bench.json), bench.png (busbw chart) and bench.log (stderr, timing).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/bench"
start=$(date +%s)
timeout 170 python3 -m ddp_doctor bench --gpu-health --backend nccl --nproc 1 \
    --min-bytes 1K --max-bytes 1G --timeout 160 \
    --format json --output "$OUT/bench/bench.json" --plot "$OUT/bench/bench.png" \
    2> "$OUT/bench/bench.log"
rc=$?
echo "ddp-doctor bench exit $rc after $(( $(date +%s) - start )) s" >> "$OUT/bench/bench.log"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv >> "$OUT/bench/bench.log" 2>&1 || true
# Exit 1 means a finding (e.g. a warning-level shortfall is 0); 2/3 are the tool's own errors.
[ "$rc" -le 1 ]
