# Run on the device machine from the repository root, with .dev/pkb an export of
# togethercomputer/ParallelKernelBench at commit 3cc0f9b (git archive HEAD | tar x -C .dev/pkb).
# Four candidates of problem 1 (cand_*.py here, copied to PKB's name 1_allreduce_<backend>.py so
# each lands in its own logs/problem_1_allreduce/<backend>/), each recorded twice: pass 1 one
# after another, pass 2 the four at once (its times are not clean; its counts are).
here=docs/measurements/pkb_run_profile_h200_w1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
cands="nccl dtype_fallback memcpy_peer except_fallback"
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 python3 -m torch.distributed.run --standalone --nproc-per-node 1 $here/probe_events.py 2>&1 | grep -v '^\[' | tee $OUT/probe.txt
for c in $cands; do cp $here/cand_$c.py .dev/1_allreduce_$c.py; done
one() {  # pass out backend
  log=$OUT/log_$1_$3.txt
  timeout 170 python3 -m pkbsim run --pkb-root .dev/pkb --problem 1 --world-size 1 \
    --solution .dev/1_allreduce_$3.py --profile-iters 10 --out $2 --timeout 120 >$log 2>&1
  echo "pass $1 $3: exit $?"; grep -E '^(reference|candidate) ' $log
}
for c in $cands; do one 1 $OUT/run1 $c; done
for c in $cands; do one 2 $OUT/run2_$c $c & done; wait
cd $OUT && find . -name 'rank_*_profile.json' -o -name 'rank_*_perf.json' | sort | tar czf logs.tgz -T -
find . -path '*/runs/*' -name console.log | tar czf consoles.tgz -T - log_*.txt
rm -rf run1 run2_*; rm -f log_*.txt; ls -la $OUT
