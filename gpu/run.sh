#!/usr/bin/env bash
# ddp-doctor run on one H200: a one-rank NCCL job (tests/jobwatch/jobs/gpu_train.py) watched by the doctor.
#   healthy.json  the job healthy, NVML timeline + flight recorder on (report; tests/jobwatch/test_gpu_fixture.py)
#   healthy.html  the same report as HTML (GPU utilisation chart)
#   stuck.json    the job stuck in a kernel that never ends: named as stuck in CUDA work, not a collective
#   overhead.txt  benchmarks/bench_run_overhead.py --backend nccl: step time bare vs under ddp-doctor run
#   run.log       stderr of every step, exit codes, nvidia-smi
# Fixtures go to tests/fixtures/gpu/run/.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/run"
log="$OUT/run/run.log"
work=$(mktemp -d /tmp/ddp-doctor-gpu-run-XXXXXX)
job="$PWD/tests/jobwatch/jobs/gpu_train.py"
torchrun=(python3 -m torch.distributed.run --nproc-per-node 1 --monitor-interval 0.2)

echo "== healthy" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$work/healthy" --format json --output "$OUT/run/healthy.json" \
    -- "${torchrun[@]}" "$job" --mode healthy --steps 5000 >> "$log" 2>&1
echo "healthy: exit $?" >> "$log"
python3 -m ddp_doctor render "$OUT/run/healthy.json" --format html --output "$OUT/run/healthy.html" >> "$log" 2>&1

echo "== stuck" >> "$log"
timeout 300 python3 -m ddp_doctor run --run-dir "$work/stuck" --hang-after 20 --on-hang kill --exit-code verdict \
    --format json --output "$OUT/run/stuck.json" -- "${torchrun[@]}" "$job" --mode stuck >> "$log" 2>&1
echo "stuck: exit $? (10 = hang)" >> "$log"
# Nothing of the stuck job may survive: a kernel-stuck process still alive would hold the GPU.
pgrep -af gpu_train.py >> "$log" 2>&1 && echo "LEFTOVER PROCESSES" >> "$log"

echo "== overhead" >> "$log"
timeout 420 python3 benchmarks/bench_run_overhead.py --backend nccl --nproc 1 --pairs 5 --steps 400 \
    > "$OUT/run/overhead.txt" 2>> "$log"
echo "overhead: exit $?" >> "$log"
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv >> "$log" 2>&1 || true
rm -rf "$work"
exit 0
