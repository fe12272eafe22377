#!/usr/bin/env bash
# One device call: the candidates first (run_candidates.sh, BUDGET s), then PKB's references
# (run_references.sh) for the rest of a 590 s call; each part's files tarred under $OUT.
set -u
OUT=${OUT:-out}
here=docs/measurements/pkb_trace_w1
t0=$(date +%s)
BUDGET=${BUDGET:-240} OUT=$OUT bash $here/run_candidates.sh 2>&1 | tee $OUT/candidates_console.txt
(cd $OUT && tar czf cands.tgz cands && rm -rf cands)
left=$(( 575 - ($(date +%s) - t0) ))
REF_TIMEOUT=$left OUT=$OUT bash $here/run_references.sh 2>&1 | tee $OUT/references_console.txt
(cd $OUT && tar czf refs.tgz refs && rm -rf refs)
ls -la $OUT
