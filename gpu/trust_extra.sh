#!/usr/bin/env bash
# The issue-14 cases gpu/trust.sh did not record, on the GPU node. Run from the repo root:
#   OUT=/some/dir bash gpu/trust_extra.sh
# Writes (4 files) to $OUT/trust_extra/ (tests/test_gpu_trust_extra.py re-judges them as
# tests/fixtures/gpu/trust_extra/):
#   ifname-bogus.json     NCCL_SOCKET_IFNAME=nonexist0, full check: FAIL naming the variable; the remedy
#                         names only interfaces that are UP with an address (eth0), never the DOWN ifb0
#   net-bogus-static.json NCCL_NET=Bogus, check --static: env.dist_vars WARN (never FAIL) saying where NCCL
#                         looks for a network plugin and that none is there (or PASS if the node has one)
#   net-bogus.json        NCCL_NET=Bogus, full check: the static WARN, and live.init FAIL naming NCCL_NET
#   log.txt               exit codes, the text renderings, the node's interfaces and libnccl-net files
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
ROOT="$PWD"
D="$OUT/trust_extra"
mkdir -p "$D"
LOG="$D/log.txt"
: > "$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SITE_PYTHONPATH="${PYTHONPATH:-}"
doc() {  # the doctor from the checkout, run by the node's python3 (its deps from /tmp/site)
  PYTHONPATH="$ROOT/src${SITE_PYTHONPATH:+:$SITE_PYTHONPATH}" timeout 200 python3 -m ddp_doctor "$@"
}
record() {  # name, then the command; keeps the exit code in the log
  local name="$1"; shift
  "$@" --format json --output "$D/$name.json"
  local rc=$?
  echo "== $name exited $rc" >> "$LOG"
  doc render "$D/$name.json" --format text >> "$LOG" 2>&1 || true
}
{ ip -br addr 2>&1 || true; ldconfig -p 2>/dev/null | grep -i 'nccl' || echo "no libnccl* in the ldconfig cache"; } >> "$LOG"

NCCL_SOCKET_IFNAME=nonexist0 record ifname-bogus doc check --timeout 120
NCCL_NET=Bogus record net-bogus-static doc check --static
NCCL_NET=Bogus record net-bogus doc check --timeout 120
echo "done" >> "$LOG"
