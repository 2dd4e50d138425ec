#!/bin/bash
# The 20-problem sample (`kskill eval run .kb --sample 20 --seed 0`), each problem run by `kskill eval`
# at default settings and then with --exhaustive, one problem per invocation. The problems that the
# previous round (kb20-h200-s28) did not reach come first, levels interleaved; the nine it measured
# follow, those whose result its Reviewer changes could move (a numeric failure there) first.
# Each problem and setting has its own results folder, /tmp/pairs/{def,exh}/levelN-M.
# usage: bash eval/runs/kb20-h200-s29/run.sh LAST_START_S [levelN/M ...]
#   starts no invocation after LAST_START_S s; runs the problems named, else the whole ORDER below
# The state lives in /tmp/pairs, which a warm machine keeps between calls. A fresh machine starts
# from .gpustate when a call carries it (an earlier call's state.tgz, its folder `pairs` renamed).
# Run it from the checkout's root, with .whl (the dependencies and a kskill wheel) and .kb carried.
R=$PWD; S=/tmp/pairs; mkdir -p $OUT/logs
[ ! -d $S ] && [ -d $R/.gpustate ] && cp -r $R/.gpustate $S
mkdir -p $S
LAST=${1:-455}
source $R/eval/runs/setup_gpu.sh
ORDER="level1/79 level2/50 level3/25 level1/84 level2/54 level1/94 level2/55 level3/31 level1/97 level2/68 level3/42
       level1/18 level2/29 level3/20 level1/30 level2/2 level1/34 level2/19 level1/65 level2/38"
[ $# -gt 1 ] && ORDER="${*:2}"  # the problems given after LAST_START_S, in their order, instead
for p in $ORDER; do
  for setting in def exh; do
    d=$S/$setting/${p/\//-}
    ls $d/rows/*.json >/dev/null 2>&1 && continue
    if [ $SECONDS -gt $LAST ]; then echo "stopping at ${SECONDS}s before $setting $p"; break 2; fi
    opt=""; [ $setting = exh ] && opt="--optimize-option=--exhaustive"
    t0=$SECONDS
    kskill eval run $R/.kb --filter "${p}_*" --time-limit 60 --workers 1 --out $d --resume $opt \
      >> $OUT/logs/$setting.txt 2>&1
    echo "$setting $p rc=$? took $((SECONDS-t0))s (at ${SECONDS}s): $(ls $d/rows 2>/dev/null)"
    tar czf $OUT/state.tgz --exclude='*.pt' --exclude=kh -C /tmp pairs
  done
done
tar czf $OUT/state.tgz --exclude='*.pt' --exclude=kh -C /tmp pairs
echo "end at ${SECONDS}s"
