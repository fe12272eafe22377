#!/usr/bin/env bash
# PKB's references at W = 1 on one H100 or H200 (the console says which), timed as PKB times them, each with 10 more calls
# profiled and their Kineto trace kept (validate/pkb_references.py --profile-iters 10:
# logs/problem_<stem>/reference/rank_0_{perf,profile}.json and rank_0_trace.json.gz).
# Run from the repository root on the GPU machine, with .dev/pkb an export of
# togethercomputer/ParallelKernelBench at commit 3cc0f9b:
#   git --git-dir=<mirror> archive 3cc0f9b | tar x -C .dev/pkb
# 48 leaks a communicator per call and 62, 64, 78 need minutes for PKB's 600 calls: run apart.
set -u
PKB=${PKB:-.dev/pkb}
OUT=${OUT:-out}
SKIP=${SKIP:-48,62,64,78}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT/refs"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
timeout ${REF_TIMEOUT:-520} python3 -m torch.distributed.run --standalone --nproc-per-node 1 \
    validate/pkb_references.py --pkb-root "$PKB" --logs-dir "$OUT/refs/logs" \
    --status-dir /tmp/refs_status --summary "$OUT/refs/summary.json" --skip "$SKIP" \
    --profile-iters 10 --problem-timeout 30 > "$OUT/refs/console.log" 2>&1
echo "references: exit $?"; date -u
find "$OUT/refs" -name "*.pt" -delete
