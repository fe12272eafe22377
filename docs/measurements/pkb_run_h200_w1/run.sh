# Run on the device machine from the repository root, with .dev/pkb an export of
# togethercomputer/ParallelKernelBench at commit 3cc0f9b (git archive HEAD | tar x -C .dev/pkb).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for p in 1_allreduce 13_gemm_allreduce; do
  cp .dev/pkb/reference/$p.py .dev/${p}_same.py
  timeout 150 python3 -m pkbsim run --pkb-root .dev/pkb --problem $p --solution .dev/${p}_same.py --world-size 1 --out $OUT/run --timeout 120 2>&1 | tail -8
done
cd $OUT && tar czf run.tgz run && rm -rf run
