#!/usr/bin/env bash
# PKB's references at W = 1 on one H200 at two sizes (PKB's --m 1024 and 4096, --n 1024), each
# problem in a fresh process as PKB's run_local.py does (one per problem; the two sizes one after
# the other in it), timed PKB's way (validate/pkb_references.py: 500 warm-up, 100 timed calls)
# and profiled (10 calls: host issue time, GPU busy time, kernels). Run from the repository root
# on the GPU machine; PKB = a checkout of togethercomputer/ParallelKernelBench at 3cc0f9b
# (git --git-dir=<mirror> archive 3cc0f9b | tar x -C .dev/pkb; .dev/ is git-ignored: carry it).
#   bash docs/measurements/pkb_references_h200_sizes/run.sh odd  summary_odd.json   # ids 1, 3, ...
#   bash docs/measurements/pkb_references_h200_sizes/run.sh even summary_even.json  # ids 2, 4, ...
# 62, 64 and 78 (55 to 242 ms a call at --m 1024: PKB's 600 calls take minutes) are left out.
set -u
HALF=${1:?odd or even}
PKB=${PKB:-.dev/pkb}
OUT=${WORK:-/tmp/pkb_sizes}  # large logs stay here; the merged summary goes to $2
RUN=${RUN:-1}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1
mkdir -p "$OUT/run$RUN/summaries"
start=${FIRST:-$([ "$HALF" = odd ] && echo 1 || echo 2)}  # FIRST: resume from that id
END=$((SECONDS + ${BUDGET_S:-100000}))  # problems not started by then are left out
for p in $(seq "$start" 2 87); do
  [ "$SECONDS" -lt "$END" ] || { echo "budget: stopped before $p" >> "$OUT/run$RUN/console_$HALF.log"; break; }
  case $p in 62|64|78) continue ;; esac
  MASTER_PORT=$((29600 + p)) timeout 75 python3 validate/pkb_references.py --pkb-root "$PKB" \
      --logs-dir "$OUT/run$RUN/logs" --status-dir "/tmp/status_$RUN" \
      --summary "$OUT/run$RUN/summaries/$p.json" --only "$p" --sizes 1024x1024,4096x1024 \
      --profile-iters 10 --problem-timeout 30 >> "$OUT/run$RUN/console_$HALF.log" 2>&1
done
find "$OUT" -name "*.pt" -delete
python3 -c "
import glob, json, sys
rows = [r for f in sorted(glob.glob('$OUT/run$RUN/summaries/*.json')) for r in json.load(open(f))['problems']]
json.dump({'world_size': 1, 'device': 'cuda', 'half': '$HALF', 'problems': rows}, open(sys.argv[1], 'w'), indent=1)
" "${2:-$OUT/summary_$HALF.json}"
