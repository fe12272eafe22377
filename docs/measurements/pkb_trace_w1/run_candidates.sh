#!/usr/bin/env bash
# The candidates in candidates/ (<problem stem>_<backend>.py) through `pkbsim run` at W = 1:
# PKB's reference and the candidate, checked and timed as PKB does, then 10 calls of each
# profiled with their Kineto trace kept (logs/problem_<stem>/<backend>/rank_0_trace.json.gz).
# Run from the repository root on the GPU machine, .dev/pkb as in run_references.sh.
# ONLY: a space-separated list of file names to run (default: all); a run starts only while
# less than BUDGET seconds have passed.
set -u
PKB=${PKB:-.dev/pkb}
OUT=${OUT:-out}
BUDGET=${BUDGET:-500}
here=docs/measurements/pkb_trace_w1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/cands"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
for f in ${ONLY:-$(cd $here/candidates && ls *.py)}; do
  if [ $(( $(date +%s) - start )) -gt "$BUDGET" ]; then echo "skipped $f (budget)"; continue; fi
  id=${f%%_*}
  timeout 200 python3 -m pkbsim run --pkb-root "$PKB" --problem "$id" --world-size 1 \
      --solution "$here/candidates/$f" --profile-iters 10 --out "$OUT/cands" --timeout 150 \
      > "$OUT/cands/console_${f%.py}.txt" 2>&1
  echo "$f: exit $? ($(( $(date +%s) - start )) s)"
  grep -E '^(reference|candidate) ' "$OUT/cands/console_${f%.py}.txt"
done
find "$OUT/cands" -name "*.pt" -delete
date -u
