#!/bin/bash
# The 20-problem sample (seed 0), each problem run by `kskill eval` at default settings and then with
# --exhaustive, one problem per invocation, levels interleaved so that a partial run stays stratified.
# usage: bash eval/runs/kb20-h200-s28/run.sh LAST_START_S   (starts no invocation after LAST_START_S s of this call)
# The state lives in /tmp/pairs, which a warm machine keeps between calls (the checkout's ignored files
# were not kept). A fresh machine starts from .gpustate when a call carries it: the folders of this run
# (def-L1 ... exh-L3) of an earlier call's state.tgz, whose folder `pairs` is renamed `.gpustate`.
# Run it from the checkout's root, with .whl (the dependencies and a kskill wheel) and .kb carried.
R=$PWD; S=/tmp/pairs; mkdir -p $OUT/logs
[ ! -d $S ] && [ -d $R/.gpustate ] && cp -r $R/.gpustate $S
mkdir -p $S
LAST=${1:-470}
source $R/eval/runs/setup_gpu.sh
if [ ! -f $S/dp/done ]; then
  (cd /tmp && timeout 150 python3 -m kskill.eval.dot_precision_check --out $OUT/dp) > $OUT/logs/dp.txt 2>&1 \
    && mkdir -p $S/dp && touch $S/dp/done
  echo "dot_precision_check rc=$? at ${SECONDS}s"; tail -40 $OUT/logs/dp.txt
fi
# The problems `kskill eval run .kb --sample 20 --seed 0` selects, by level.
L1="level1/18_* level1/30_* level1/34_* level1/65_* level1/79_* level1/84_* level1/94_* level1/97_*"
L2="level2/2_* level2/19_* level2/29_* level2/38_* level2/50_* level2/54_* level2/55_* level2/68_*"
L3="level3/20_* level3/25_* level3/31_* level3/42_*"
SEQ="1 2 1 2 3 1 2 1 2 3 1 2 1 2 3 1 2 1 2 3"
rows() { ls $1/rows/*.json 2>/dev/null | wc -l; }
declare -A seen=([1]=0 [2]=0 [3]=0)
for lv in $SEQ; do
  k=${seen[$lv]}; seen[$lv]=$((k+1))
  eval "pats=\$L$lv"; F=""; for p in $pats; do F="$F --filter $p"; done
  for setting in def exh; do
    d=$S/$setting-L$lv
    [ $(rows $d) -gt $k ] && continue
    if [ $SECONDS -gt $LAST ]; then echo "stopping at ${SECONDS}s before $setting L$lv #$k"; break 3; fi
    opt=""; [ $setting = exh ] && opt="--optimize-option=--exhaustive"
    t0=$SECONDS
    kskill eval run $R/.kb $F --time-limit 60 --workers 1 --out $d --resume --stop-after 1 $opt \
      >> $OUT/logs/$setting-L$lv.txt 2>&1
    echo "$setting L$lv #$k rc=$? took $((SECONDS-t0))s (at ${SECONDS}s): $(ls -t $d/rows | head -1)"
    tar czf $OUT/state.tgz --exclude='*.pt' --exclude=kh --exclude=dp -C /tmp pairs
  done
done
tar czf $OUT/state.tgz --exclude='*.pt' --exclude=kh --exclude=dp -C /tmp pairs
echo "end at ${SECONDS}s"
