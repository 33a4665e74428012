#!/usr/bin/env bash
# Record real GPU failure logs for the diagnosis tests (issue 4), on a machine with ONE H200.
# Run from the repo root:  OUT=/some/dir bash gpu/diagnose.sh
# Writes (flat files, at most 3):
#   $OUT/diagnose/cases.log       every case's combined stdout+stderr, each after a "==> case NAME exit=N <==" header
#   $OUT/diagnose/explain.jsonl   one line per case: {"case", "exit", "root_cause", "ids"} from ddp-doctor explain here
#   $OUT/diagnose/env.txt         nvidia-smi -L, driver, torch / CUDA / NCCL versions
# Every step is bounded with `timeout`; the whole script takes about a minute.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
OUT="${OUT:?set OUT to the output directory}"
DEST="$OUT/diagnose"
mkdir -p "$DEST"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="${PYTHON:-python3}"
TORCHRUN="${TORCHRUN:-torchrun}"

cat > "$WORK/case.py" <<'PYEOF'
import os, sys, torch, torch.distributed as dist
mode = sys.argv[1]
local = int(os.environ.get("LOCAL_RANK", "0"))
if mode == "dup":          # both ranks on GPU 0: NCCL must refuse ("Duplicate GPU detected")
    torch.cuda.set_device(0)
elif mode == "ordinal":    # rank 1 asks for cuda:1 on a one-GPU machine
    torch.cuda.set_device(local)
elif mode == "oom":        # far more than 141 GB
    torch.cuda.set_device(0)
    x = torch.empty(400 * 2**30, dtype=torch.uint8, device="cuda")
elif mode == "novis":      # started with CUDA_VISIBLE_DEVICES= (empty)
    torch.cuda.set_device(local)
elif mode == "healthy":
    torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()} all_reduce ok: {t[0].item()}")
dist.destroy_process_group()
PYEOF

run_case() {  # name, env assignments..., -- argv...
  local name="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log="$WORK/$name.log"
  env "${envs[@]}" timeout -k 5 60 "$@" >"$log" 2>&1
  local rc=$?
  { echo "==> case $name exit=$rc <=="; cat "$log"; } >> "$DEST/cases.log"
  "$PY" - "$name" "$rc" "$log" >> "$DEST/explain.jsonl" <<'PYEOF'
import json, subprocess, sys
name, rc, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
p = None
try:
    p = subprocess.run([sys.executable, "-m", "ddp_doctor", "explain", log, "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    report = json.loads(p.stdout)
    print(json.dumps({"case": name, "exit": rc, "explain_exit": p.returncode, "root_cause": report["root_cause"],
                      "ids": [r["id"] for r in report["results"]]}))
except Exception as exc:  # record, never abort the recording
    print(json.dumps({"case": name, "exit": rc, "error": f"{type(exc).__name__}: {exc}",
                      "stderr": (p.stderr[-2000:] if p is not None else "")}))
PYEOF
  echo "case $name: exit $rc"
}

: > "$DEST/cases.log"; : > "$DEST/explain.jsonl"
{
  echo "date: $(date -u +%FT%TZ)"
  timeout 20 nvidia-smi -L 2>&1
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  timeout 60 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())" 2>&1
} > "$DEST/env.txt"

run_case duplicate_gpu NCCL_DEBUG=WARN -- "$TORCHRUN" --standalone --nproc-per-node 2 "$WORK/case.py" dup
run_case more_ranks_than_gpus NCCL_DEBUG=WARN -- "$TORCHRUN" --standalone --nproc-per-node 2 "$WORK/case.py" ordinal
run_case cuda_visible_devices_empty CUDA_VISIBLE_DEVICES= -- "$TORCHRUN" --standalone --nproc-per-node 1 "$WORK/case.py" novis
run_case cuda_oom NCCL_DEBUG=WARN -- "$TORCHRUN" --standalone --nproc-per-node 1 "$WORK/case.py" oom
run_case healthy_nccl_info NCCL_DEBUG=INFO -- "$TORCHRUN" --standalone --nproc-per-node 1 "$WORK/case.py" healthy
ls -la "$DEST"
