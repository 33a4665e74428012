#!/usr/bin/env bash
# ddp-doctor run on one H200, two failures whose first failing rank run.failure must name in explain's words:
#   unused.json       DDP over NCCL with a parameter outside the loss (tests/jobwatch/jobs/gpu_train.py --mode
#                     unused): the exception line (not torch's trailing "In addition, ..." hint) and
#                     diag.ddp_unused_parameters's cause and remedy
#   ordinal.json      torchrun --nproc-per-node 2 on this one GPU: rank 1's torch.cuda.set_device(1) raises
#                     'CUDA error: invalid device ordinal' (not the "Compile with TORCH_USE_CUDA_DSA" hint),
#                     phased as device setup, with diag.invalid_device_ordinal's cause
#   unused-run/, ordinal-run/   the run directories (rank-N.log, rank-N.error.json, ...): the tests re-judge them
#                     with `ddp-doctor explain DIR` on any machine
#   run_failures.log  stderr of every step, exit codes, nvidia-smi
# Fixtures go to tests/fixtures/gpu/run_failures/ (tests/jobwatch/test_gpu_failures.py).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
dest="$OUT/run_failures"
mkdir -p "$dest"
log="$dest/run_failures.log"
job="$PWD/tests/jobwatch/jobs/gpu_train.py"

echo "== unused" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$dest/unused-run" --format json --output "$dest/unused.json" \
    -- python3 -m torch.distributed.run --nproc-per-node 1 --monitor-interval 0.2 "$job" --mode unused >> "$log" 2>&1
echo "unused: exit $? (1 = the job failed)" >> "$log"

echo "== ordinal" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$dest/ordinal-run" --format json --output "$dest/ordinal.json" \
    -- python3 -m torch.distributed.run --nproc-per-node 2 --monitor-interval 0.2 "$job" --mode healthy --steps 50 \
    >> "$log" 2>&1
echo "ordinal: exit $? (1 = the job failed)" >> "$log"
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv >> "$log" 2>&1 || true
exit 0
