#!/usr/bin/env bash
# What a person sees on the lent H200 (issue 18), recorded for tests/fixtures/gpu/experience/:
#   check.txt            the default `ddp-doctor check` text (stdout): the headline must say NCCL on the
#                        GPU was verified, and the whole output fit one 50-line screen
#   check.json           `ddp-doctor check --format json`: the `headline` field of the report
#   check.stderr         stderr of both runs (nothing expected: no progress outside a terminal)
#   progress.typescript  `check` run in a pseudo-terminal by `script`: the live progress frames (each rank's
#                        phase, elapsed time against its deadline) as the terminal received them
#   check-tty.txt        the text report of that terminal run (written through --output)
# Runs from the repo root; needs python3 with torch (CUDA), torchrun on PATH; about 60 s.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset CI
: "${OUT:?set OUT to the output directory}"
dest="$OUT/experience"
mkdir -p "$dest"
timeout 170 python3 -m ddp_doctor check --timeout 150 > "$dest/check.txt" 2> "$dest/check.stderr"
echo "ddp-doctor check (text) exited $?" >> "$dest/check.stderr"
timeout 170 python3 -m ddp_doctor check --timeout 150 --format json --output "$dest/check.json" 2>> "$dest/check.stderr"
echo "ddp-doctor check (json) exited $?" >> "$dest/check.stderr"
if command -v script >/dev/null 2>&1; then
    # A pseudo-terminal on stdin/stdout/stderr, 140x50, as a person's terminal would be.
    TERM=xterm-256color COLUMNS=140 LINES=50 timeout 170 script -qfec \
        "stty cols 140 rows 50; python3 -m ddp_doctor check --timeout 150 --output $dest/check-tty.txt" \
        "$dest/progress.typescript" > /dev/null 2>&1
    echo "ddp-doctor check (terminal) exited $?" >> "$dest/check.stderr"
else
    echo "no script(1) here: progress.typescript not recorded" >> "$dest/check.stderr"
fi
ls -l "$dest"
