#!/usr/bin/env bash
# The live chain on one GPU with NCCL (1 rank), recorded for tests/fixtures/gpu/live/:
#   report.json        `ddp-doctor check --format json` (every phase, NVML samples, NCCL transports)
#   nccl-rank-0.log    rank 0's NCCL_DEBUG=INFO output (NCCL_DEBUG_FILE)
#   rank-0.log         rank 0's stdout+stderr
# Runs from the repo root; needs python3 with torch (CUDA), torchrun on PATH; about 30 s.
set -uo pipefail
export PYTHONPATH="$PWD/src" NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
dest="$OUT/live"
mkdir -p "$dest"
timeout 170 python3 -m ddp_doctor check --timeout 150 --keep-run-dir --format json --output "$dest/report.json"
echo "ddp-doctor check exited $?"
run_dir=$(python3 -c "import json,sys; print((json.load(open(sys.argv[1]))['facts'].get('live') or {}).get('run_dir') or '')" "$dest/report.json" 2>/dev/null)
if [ -n "$run_dir" ] && [ -d "$run_dir" ]; then
    nccl=$(ls "$run_dir"/nccl.*.log 2>/dev/null | head -n 1)
    [ -n "$nccl" ] && cp "$nccl" "$dest/nccl-rank-0.log"
    [ -f "$run_dir/rank-0.log" ] && cp "$run_dir/rank-0.log" "$dest/rank-0.log"
    rm -rf "$run_dir"
fi
ls -l "$dest"
