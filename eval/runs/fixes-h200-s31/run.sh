#!/bin/bash
# The problems of the 40-problem sample (eval/runs/kb40-h200) that stayed below 0.9x of torch.compile,
# run again at default settings after the changes they led to: split rows for few long norm rows, a
# fused exclusive scan, kernel_fusion planned where a row operator could absorb a chain, the adopted
# convolution read channels-last by a spatial reduction, and the tiled channels-last transpose.
# usage: bash eval/runs/fixes-h200-s31/run.sh STOP_AFTER_S   (from the checkout's root, .whl and .kb carried)
R=$PWD; S=/tmp/fixes; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
kskill eval run $R/.kb --filter 'level1/40_*' --filter 'level1/92_*' --filter 'level2/2_*' --filter 'level2/44_*' \
  --filter 'level2/54_*' --filter 'level2/85_*' --time-limit 60 --workers 1 --out $S/eval --resume \
  --stop-after ${1:-200} > $OUT/logs/fixes.txt 2>&1
echo "eval rc=$? at ${SECONDS}s"
tail -12 $OUT/logs/fixes.txt
tar czf $OUT/fixes.tgz --exclude='*.pt' --exclude=kh -C $S eval
