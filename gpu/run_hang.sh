#!/usr/bin/env bash
# ddp-doctor run on one H200 under the learned hang threshold (the defaults: no --hang-after).
#   healthy.json   gpu/run.sh's healthy one-rank NCCL job again: no hang named under the learned threshold
#   stuck.json     gpu/run.sh's job stuck in a kernel that never ends (at step 10, inside the start-up allowance):
#                  still named as stuck in CUDA work, not a collective
#   stall_printing.json  new: a one-rank NCCL job stepping ~20 times a second for 40 s, then an all_reduce queued
#                  behind a kernel that never ends while the rank keeps printing a line a second: its output never
#                  stops, its collectives do; the learned threshold names it (a threshold on silence of stdout
#                  never would); stall_printing.rank-0.log: what the rank printed
#   run_hang.log   stderr of every step, exit codes, leftover processes, torch / NCCL versions
# Fixtures go to tests/fixtures/gpu/run_hang/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/run_hang"
log="$OUT/run_hang/run_hang.log"
work=$(mktemp -d /tmp/ddp-doctor-gpu-hang-XXXXXX)
job="$PWD/tests/jobwatch/jobs/gpu_train.py"
torchrun=(python3 -m torch.distributed.run --nproc-per-node 1 --monitor-interval 0.2)
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" >> "$log" 2>&1

echo "== healthy (learned threshold)" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$work/healthy" --format json --output "$OUT/run_hang/healthy.json" \
    -- "${torchrun[@]}" "$job" --mode healthy --steps 5000 >> "$log" 2>&1
echo "healthy: exit $?" >> "$log"

echo "== stuck (learned threshold)" >> "$log"
timeout 420 python3 -m ddp_doctor run --run-dir "$work/stuck" --on-hang kill --exit-code verdict \
    --format json --output "$OUT/run_hang/stuck.json" -- "${torchrun[@]}" "$job" --mode stuck >> "$log" 2>&1
echo "stuck: exit $? (10 = hang)" >> "$log"
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"

echo "== stall_printing (learned threshold)" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$work/stall" --on-hang kill --exit-code verdict \
    --format json --output "$OUT/run_hang/stall_printing.json" \
    -- "${torchrun[@]}" "$job" --mode stall-printing --stall-after-s 40 >> "$log" 2>&1
echo "stall_printing: exit $? (10 = hang)" >> "$log"
cp "$work/stall/rank-0.log" "$OUT/run_hang/stall_printing.rank-0.log" 2>> "$log"
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"

nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv >> "$log" 2>&1 || true
rm -rf "$work"
exit 0
