#!/bin/bash
# #14's 40-problem sample (`--sample 40 --seed 0`, default settings, --time-limit 60, one worker), grown
# from the 20-problem sample's default-setting rows: those already measured (eval/runs/kb20-h200-s28,
# -s29 and /tmp/pairs of this machine, the newest of each problem) are copied in, and `--resume` runs
# the others, starting none after STOP_AFTER_S seconds.
# usage: bash eval/runs/kb40-h200/run.sh STOP_AFTER_S   (from the checkout's root, .whl and .kb carried)
R=$PWD; S=/tmp/kb40; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
D=$S/eval
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# a fresh machine goes on from an earlier call's kb40.tgz, unpacked into .gpustate/kb40 and carried
[ ! -d $D ] && [ -d $R/.gpustate/kb40/eval ] && cp -r $R/.gpustate/kb40/eval $D
if [ ! -f $D/eval.json ]; then
  kskill eval run $R/.kb --sample 40 --seed 0 --time-limit 60 --workers 1 --out $D --stop-after 0 > /dev/null 2>&1
  mkdir -p $D/rows
  for f in $R/eval/runs/kb20-h200-s28/def-L*/rows/*.json $R/eval/runs/kb20-h200-s29/def/*/rows/*.json \
           /tmp/pairs/def/*/rows/*.json; do
    # later folders replace earlier ones: the newest measurement stays; a row measured on another GPU
    # model is left out, so that the table's figures all come from one kind of card
    [ -f "$f" ] && grep -q "\"gpu\": \"$GPU\"" "$f" && cp "$f" $D/rows/
  done
  echo "seeded with $(ls $D/rows | wc -l) rows"
fi
kskill eval run $R/.kb --sample 40 --seed 0 --time-limit 60 --workers 1 --out $D --resume --stop-after ${1:-450} \
  >> $OUT/logs/kb40.txt 2>&1
echo "eval rc=$? at ${SECONDS}s: $(ls $D/rows | wc -l) of 40 rows"
tail -30 $OUT/logs/kb40.txt
tar czf $OUT/kb40.tgz --exclude='*.pt' --exclude=kh -C $S eval
