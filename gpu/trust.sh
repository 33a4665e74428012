#!/usr/bin/env bash
# Record the verdicts issue 14 is about on a GPU node, for tests/fixtures/gpu/trust/.
# Run from the repo root, with the doctor's dependency wheels in .whl/ (see docs/gpu-results.md):
#   OUT=/some/dir bash gpu/trust.sh
# Writes (8 files) to $OUT/trust/:
#   venv-check.json    the doctor in a venv of its own (no torch; like pipx), the node's python3 with torch
#                      and its torchrun on PATH: full check, NCCL, expected exit 0
#   system-check.json  the doctor run by the node's own python3: full check, expected exit 0
#   cvd-bogus.json     CUDA_VISIBLE_DEVICES=<a UUID that does not exist>: expected FAIL (env.gpus.expected)
#   busy.json          a background process holding ~100 GiB and spinning the SMs: env.gpus.busy WARN naming
#                      its pid, live.balance.gpu_util not claiming the load as this job's
#   algo-bogus.json    NCCL_ALGO=Bogus: named as invalid (env.dist_vars) and as the root cause if the run fails
#   net-bogus.json     NCCL_NET=Bogus: the live failure names NCCL_NET
#   bench-1rank.json   bench with one rank: no bandwidth figure
#   log.txt            exit codes, the busy process's pid, the text renderings
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
ROOT="$PWD"
D="$OUT/trust"
mkdir -p "$D"
LOG="$D/log.txt"
: > "$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SITE_PYTHONPATH="${PYTHONPATH:-}"
doc() {  # the doctor from the checkout, run by the node's python3 (its deps from /tmp/site or .whl)
  PYTHONPATH="$ROOT/src${SITE_PYTHONPATH:+:$SITE_PYTHONPATH}" timeout 200 python3 -m ddp_doctor "$@"
}
record() {  # name, then the command; keeps the exit code in the log
  local name="$1"; shift
  "$@" --format json --output "$D/$name.json"
  local rc=$?
  echo "== $name exited $rc" >> "$LOG"
  doc render "$D/$name.json" --format text >> "$LOG" 2>&1 || true
}

# 1. The doctor in its own venv: wheels from .whl/ and this checkout's package, no torch in it.
rm -rf /tmp/dv && python3 -m venv /tmp/dv >> "$LOG" 2>&1
# PYTHONPATH off: with the node's site dir on it, pip would call the wheels "already satisfied" and skip them.
env -u PYTHONPATH /tmp/dv/bin/python -m pip install -q --no-index --no-deps --no-compile "$ROOT"/.whl/*.whl >> "$LOG" 2>&1
env -u PYTHONPATH /tmp/dv/bin/python -c 'import yaml, rich, re2, pynvml' >> "$LOG" 2>&1 || echo "doctor venv is missing a dependency" >> "$LOG"
SP=$(/tmp/dv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -r "$ROOT/src/ddp_doctor" "$SP/ddp_doctor"  # an installed (not editable) package, as pip would lay it out
printf '#!/tmp/dv/bin/python\nimport sys\nfrom ddp_doctor.cli import main\nsys.exit(main())\n' > /tmp/dv/bin/ddp-doctor
chmod +x /tmp/dv/bin/ddp-doctor
echo "doctor venv has torch: $(/tmp/dv/bin/python -c 'import torch' 2>/dev/null && echo yes || echo no)" >> "$LOG"
TR=$(command -v torchrun || true)
[ -z "$TR" ] && TR=$(dirname "$(readlink -f "$(command -v python3)")")/torchrun
echo "torchrun on PATH: $TR -> $(head -1 "$TR" 2>/dev/null)" >> "$LOG"
venv_doc() { env -u PYTHONPATH PATH="$(dirname "$TR"):$PATH" timeout 200 /tmp/dv/bin/ddp-doctor "$@"; }
record venv-check venv_doc check --timeout 150

# 2. The doctor in the node's python.
record system-check doc check --timeout 150

# 3. GPUs hidden by a CUDA_VISIBLE_DEVICES that names no GPU.
CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000 record cvd-bogus doc check --timeout 120

# 4. A busy GPU: another process holds ~100 GiB and keeps the SMs busy.
# No `timeout` wrapper: $! must be the python process itself (the pid NVML reports); it ends itself.
python3 -c '
import time, torch
hold = torch.empty(100 * 2**30, dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda")
t = time.time()
while time.time() - t < 280:
    a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
' &
BUSY=$!
echo "busy pid $BUSY" >> "$LOG"
sleep 25
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$LOG" 2>&1
record busy doc check --timeout 150
kill "$BUSY" 2>/dev/null; wait "$BUSY" 2>/dev/null

# 5. Invalid NCCL settings.
NCCL_ALGO=Bogus record algo-bogus doc check --timeout 120
NCCL_NET=Bogus record net-bogus doc check --timeout 120

# 6. bench with one rank.
record bench-1rank doc bench --nproc 1 --ops all_reduce --max-bytes 64M --timeout 120
echo "done" >> "$LOG"
