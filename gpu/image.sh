#!/usr/bin/env bash
# Record `ddp-doctor image /` on a GPU node: the node's own root audited as a rootfs directory,
# i.e. a real pip-installed CUDA torch layout (torch/version.py, nvidia-nccl-cu*, libtorch_cuda).
# Run from the repo root: OUT=/some/dir bash gpu/image.sh
# Writes: $OUT/image/host_root.json (the audit report, facts included),
#         $OUT/image/torch_truth.txt (what the imported torch says, to check the static reading).
set -uo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT/image"

# Exit 1 (a failing rule, e.g. running as root) is a result worth recording; 2/3 mean the run broke.
timeout 150 python3 -m ddp_doctor image / --max-entries 8000000 --format json --output "$OUT/image/host_root.json"
rc=$?
echo "ddp-doctor image / exited $rc"
timeout 60 python3 - > "$OUT/image/torch_truth.txt" <<'PY'
import shutil, sys, torch
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() or torch.version.cuda else None
print(f"version={torch.__version__}")
print(f"cuda={torch.version.cuda}")
print(f"nccl={'.'.join(map(str, nccl)) if nccl else None}")
print(f"location={torch.__file__}")
print(f"executable={sys.executable}")
print(f"torchrun={shutil.which('torchrun')}")
PY
cat "$OUT/image/torch_truth.txt"
[ "$rc" -le 1 ]
