#!/bin/bash
# #15's 60-problem sample (`--sample 60 --seed 0`, default settings, --time-limit 60, one worker), grown
# from the 40-problem sample it holds (eval/runs/kb40-h200): those rows, then the newer rows of the
# problems run again since (eval/runs/fixes-h200-s31 and later folders named below), are copied in,
# and `--resume` runs the others. Session 33 finished SwinMLP and GRUHidden (logs/kb60-s33.txt) and put in the
# rows of eval/runs/push-h200-s33 for the sample's problems it ran again (the report rebuilt from the rows with
# kskill.eval.runner.finalize, as a resumed run writes it). Before that, what #12 still lacks: the seed reviews of GRU (default
# and exhaustive settings) and MobileNetV2 after the profiler's calls were sized by the forward's time.
# usage: bash eval/runs/kb60-h200/run.sh STOP_AFTER_S   (from the checkout's root, .whl and .kb carried)
#   starts no problem after STOP_AFTER_S seconds; a fresh machine goes on from .gpustate/kb60 (carried),
#   where an earlier call's kb60.tgz was unpacked
R=$PWD; S=/tmp/kb60; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[ ! -d $S/eval ] && [ -d $R/.gpustate/kb60 ] && cp -r $R/.gpustate/kb60/. $S/
if [ ! -d $S/pairs/exh ]; then
  kskill eval run $R/.kb --filter 'level3/42_*' --filter 'level3/20_*' --time-limit 60 --workers 1 \
    --out $S/pairs/def --resume >> $OUT/logs/pairs.txt 2>&1
  kskill eval run $R/.kb --filter 'level3/42_*' --time-limit 60 --workers 1 --out $S/pairs/exh --resume \
    --optimize-option=--exhaustive >> $OUT/logs/pairs.txt 2>&1
  echo "pairs rc=$? at ${SECONDS}s"
fi
D=$S/eval
if [ ! -f $D/eval.json ]; then
  kskill eval run $R/.kb --sample 60 --seed 0 --time-limit 60 --workers 1 --out $D --stop-after 0 > /dev/null 2>&1
  mkdir -p $D/rows
  for f in $R/eval/runs/kb40-h200/eval/rows/*.json $R/eval/runs/fixes-h200-s31/eval/rows/*.json \
           $S/pairs/def/rows/*.json $R/eval/runs/push-h200-s33/eval/rows/*.json; do
    # later folders replace earlier ones: the newest measurement stays; a row measured on another GPU
    # model is left out, so that the table's figures all come from one kind of card
    [ -f "$f" ] && grep -q "\"gpu\": \"$GPU\"" "$f" && cp "$f" $D/rows/
  done
  echo "seeded with $(ls $D/rows | wc -l) rows"
fi
if [ $SECONDS -lt $STOP ]; then
  # stopped before the call's 600 s so that the state below is packed; --resume redoes a cut problem
  timeout -k 10 $((570 - SECONDS)) kskill eval run $R/.kb --sample 60 --seed 0 --time-limit 60 --workers 1 \
    --out $D --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/kb60.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $D/rows | wc -l) of 60 rows"
fi
tail -8 $OUT/logs/pairs.txt; tail -30 $OUT/logs/kb60.txt
tar czf $OUT/kb60.tgz --exclude='*.pt' --exclude=kh -C $S .
