#!/usr/bin/env bash
# benchmarks/bench_live_chain.py on a GPU node's CPUs (issue 27 item 6): the same 2 gloo CPU ranks as the
# yardsticks, on all cores and pinned to 2 (taskset), with the node's python3 and torch. Also records
# `check` under CUDA_VISIBLE_DEVICES= --expect-gpus 0 and under --backend gloo --nproc 2.
# Run from the repo root with the doctor's dependency wheels in .whl/ (docs/gpu-results.md); ~5 min.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CUDA_VISIBLE_DEVICES= timeout 120 python3 -m ddp_doctor check --expect-gpus 0 -q > "$OUT/check-cvd-empty.txt" 2>&1
echo "check, CUDA_VISIBLE_DEVICES= --expect-gpus 0: exit $?"
timeout 120 python3 -m ddp_doctor check --backend gloo --nproc 2 -q > "$OUT/check-gloo.txt" 2>&1
echo "check --backend gloo --nproc 2: exit $?"
args=(--check-arg=--backend=gloo --check-arg=--nproc=2)
timeout 200 python3 benchmarks/bench_live_chain.py --repeat 5 "${args[@]}" 2>&1 | tee "$OUT/bench-16cores.txt" | tail -12
timeout 200 taskset -c 0,1 python3 benchmarks/bench_live_chain.py --repeat 4 "${args[@]}" 2>&1 | tee "$OUT/bench-2cores.txt" | tail -12
