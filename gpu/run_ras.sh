#!/usr/bin/env bash
# ddp-doctor run on one H200: NCCL RAS asked on a hang (tests/jobwatch/jobs/gpu_train.py --mode stuck-allreduce).
#   ras.json        the one-rank NCCL job stuck behind a kernel that never ends, an all_reduce queued behind it:
#                   the hang is named, and NCCL's RAS (NCCL >= 2.24, localhost:28028, its listener one of the
#                   job's processes) is asked; its answer is in run.hang's evidence (tests/jobwatch/test_ras_gpu.py)
#   ras-status.txt  RAS's raw answer to STATUS, as the doctor received it
#   ras_off.json    the same job with NCCL_RAS_ENABLE=0: the report says RAS is off, not that the job is healthy
#   ncclras.txt     RAS asked directly over its text protocol while a job runs (python, not the doctor), to compare
#   run_ras.log     stderr of every step, exit codes, leftover processes
# Fixtures go to tests/fixtures/gpu/run_ras/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/run_ras"
log="$OUT/run_ras/run_ras.log"
work=$(mktemp -d /tmp/ddp-doctor-gpu-ras-XXXXXX)
job="$PWD/tests/jobwatch/jobs/gpu_train.py"
torchrun=(python3 -m torch.distributed.run --nproc-per-node 1 --monitor-interval 0.2)
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" >> "$log" 2>&1

echo "== ras (hang, RAS on)" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$work/ras" --hang-after 20 --on-hang kill --exit-code verdict \
    --format json --output "$OUT/run_ras/ras.json" -- "${torchrun[@]}" "$job" --mode stuck-allreduce >> "$log" 2>&1
echo "ras: exit $? (10 = hang)" >> "$log"
cp "$work/ras/ras-status.txt" "$OUT/run_ras/ras-status.txt" 2>> "$log" || echo "no ras-status.txt" >> "$log"
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"

echo "== ras_off (hang, NCCL_RAS_ENABLE=0)" >> "$log"
NCCL_RAS_ENABLE=0 timeout 300 python3 -m ddp_doctor run --run-dir "$work/off" --hang-after 20 --on-hang kill \
    --exit-code verdict --format json --output "$OUT/run_ras/ras_off.json" \
    -- "${torchrun[@]}" "$job" --mode stuck-allreduce >> "$log" 2>&1
echo "ras_off: exit $? (10 = hang)" >> "$log"
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"

echo "== ncclras (direct query of a running job)" >> "$log"
setsid timeout 120 "${torchrun[@]}" "$job" --mode healthy --steps 100000 >> "$log" 2>&1 &
bg=$!
sleep 25
timeout 30 python3 - > "$OUT/run_ras/ncclras.txt" 2>> "$log" <<'PY'
from ddp_doctor.jobwatch import ras
answer = ras.query({})
print(answer.report.text if answer.report else f"NO ANSWER: {answer.why_not}")
PY
echo "ncclras: exit $?" >> "$log"
kill -- -"$bg" 2>/dev/null; wait "$bg" 2>/dev/null
sleep 2; kill -9 -- -"$bg" 2>/dev/null
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"
rm -rf "$work"
exit 0
