#!/usr/bin/env bash
# PKB's references at W = 1 on one H200, timed as PKB times them (validate/pkb_references.py).
# Run from the repository root on the GPU machine; PKB = a checkout of
# togethercomputer/ParallelKernelBench at 3cc0f9b, e.g. exported with
#   git --git-dir=<mirror> archive 3cc0f9b | tar x -C .dev/pkb
# Ran 2026-12-03 on `nvidia-h200` (NVIDIA H200, driver 580.159.04, torch 2.11.0+cu130,
# NCCL 2.28.9): the first sweep 12:10-12:16 UTC, the second 12:21-12:26, the long ones 12:29-12:35,
# the top operators about 12:38, the fresh processes about 12:41-12:45.
set -u
PKB=${PKB:-.dev/pkb}
OUT=${OUT:-out}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R="python3 -m torch.distributed.run --standalone --nproc-per-node 1 validate/pkb_references.py --pkb-root $PKB"

# 1. first sweep, every problem in one process (first_sweep_*): 48 leaks communicators and
#    starves the problems after it of GPU memory.
timeout 540 $R --logs-dir $OUT/first/logs --status-dir $OUT/first/status \
    --summary $OUT/first/summary.json --problem-timeout 40 > $OUT/first_sweep_console.log 2>&1
# 2. the sweep without 48 and 64, each call profiled (summary.json, logs/, sweep_console.log),
#    then 48 in a process of its own (summary_48.json, p48_console.log).
timeout 470 $R --logs-dir $OUT/logs --status-dir $OUT/status --summary $OUT/summary.json \
    --skip 48,64 --profile-iters 10 --problem-timeout 40 > $OUT/sweep_console.log 2>&1
timeout 70 $R --logs-dir $OUT/logs --status-dir $OUT/status --summary $OUT/summary_48.json \
    --only 48 --profile-iters 10 --problem-timeout 50 > $OUT/p48_console.log 2>&1
# 3. the three that need more than 40 s for PKB's 600 calls (summary_long.json, long_console.log).
timeout 570 $R --logs-dir $OUT/logs --status-dir $OUT/status --summary $OUT/summary_long.json \
    --only 62,64,78 --profile-iters 3 --problem-timeout 170 > $OUT/long_console.log 2>&1
find $OUT -name "*.pt" -delete
# The table (any machine, no GPU):
#   python benchmarks/pkb_references_vs_model.py $OUT/logs $OUT/summary.json \
#       $OUT/summary_48.json $OUT/summary_long.json

# 4. the host operators of ten host-bound problems (summary_top_ops.json, top_ops_console.log).
timeout 200 $R --logs-dir /tmp/top_ops_logs --status-dir /tmp/top_ops_status \
    --summary $OUT/summary_top_ops.json --only 1,30,41,42,46,47,65,66,68,79 --profile-iters 10 \
    --problem-timeout 40 > $OUT/top_ops_console.log 2>&1
# 5. 22 of them again, each in a torchrun of its own as PKB's run_local.py does (fresh/).
for p in 2 9 13 17 21 25 29 36 40 44 46 51 54 58 63 66 69 73 79 83 86 10; do
  timeout 40 $R --logs-dir $OUT/fresh/logs --status-dir /tmp/fresh_status \
      --summary $OUT/fresh/summary_$p.json --only $p --problem-timeout 30 > /dev/null 2>&1
done
find $OUT -name "*.pt" -delete
# The comparisons with the other runs:
#   ... --also "fresh processes=$OUT/fresh/logs" --also "first sweep=$OUT/first/logs"
# The committed console logs have the source lines of tracebacks through PKB's files removed
# (only PKB's facts and numbers are committed, not its code).
