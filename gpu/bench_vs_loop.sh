#!/usr/bin/env bash
# Issue 14 item 7: `ddp-doctor bench` against a minimal loop of plain synchronous all_reduce calls, on
# CPU (2 gloo ranks), on the GPU machine because its 16 cores are quiet (the development machine's 2
# shared cores swing 30-50% from job to job). No GPU is used. Run from the repo root:
#   OUT=/some/dir bash gpu/bench_vs_loop.sh
# Writes to $OUT/bench_vs_loop/:
#   report.txt   the tables: median ratio bench/loop per size for (1) both methods in one job,
#                (2) separate jobs (the real `python3 -m ddp_doctor bench` command vs a torchrun job of
#                the loop) and (3) separate jobs pinned to CPUs 2-5; with each method's own job-to-job spread
#   raw.json     every measured figure (tests/bench/test_bench_vs_loop.py re-judges it as
#                tests/fixtures/gpu/bench_vs_loop/raw.json)
#   env.txt      CPUs, load, lscpu, torch version
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
: "${OUT:?set OUT to the output directory}"
D="$OUT/bench_vs_loop"
mkdir -p "$D"
{ nproc; uptime; lscpu | head -20; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$D/env.txt" 2>&1
start=$(date +%s)
timeout 560 python3 -u benchmarks/bench_vs_loop.py --rounds 6 --parts same-job,separate-jobs,first-size --cpus 2-5 --json "$D/raw.json" > "$D/report.txt" 2>&1
rc=$?
echo "bench_vs_loop exit $rc after $(( $(date +%s) - start )) s (0: every median ratio within 5%, 1: not)" >> "$D/report.txt"
# 0 and 1 are both results; anything else (a failed job, the timeout) is not.
[ "$rc" -le 1 ]
