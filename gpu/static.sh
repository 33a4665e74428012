#!/usr/bin/env bash
# Record `ddp-doctor check --static` on a GPU node, for tests/fixtures/gpu/static/.
# Run from the repo root: OUT=/some/dir bash gpu/static.sh
# Writes: $OUT/static/report.json (the full JSON report, facts included),
#         $OUT/static/nvidia-smi.txt (nvidia-smi -q and topo -m, to cross-check NVML's facts).
set -uo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/static"

# Exit 1 (a failing check) is a result worth recording; only 2/3 mean the run itself broke.
timeout 120 python3 -m ddp_doctor check --static --format json --output "$OUT/static/report.json"
rc=$?
echo "ddp-doctor check --static exited $rc"
{
  echo "### nvidia-smi -q"
  timeout 15 nvidia-smi -q 2>&1
  echo
  echo "### nvidia-smi topo -m"
  timeout 15 nvidia-smi topo -m 2>&1
} > "$OUT/static/nvidia-smi.txt"
python3 -m ddp_doctor render "$OUT/static/report.json" --format text || true
[ "$rc" -le 1 ]
