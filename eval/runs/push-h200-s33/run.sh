#!/bin/bash
# #15, session 33: the problems of the 60-problem sample the new skills reach (split_normalization; logsumexp,
# and short rows many to a program, in triton_reduction), sample rows last measured on older commits (L1/18,
# L2/29, L2/19, L2/38, L2/50), then development-set problems outside the sample with a logsumexp or a norm
# feeding a reduction (L2/43, L2/23, L2/18), at the sample's
# settings (--time-limit 60, one worker, torch.compile default mode in the same run).
# usage: bash eval/runs/push-h200-s33/run.sh STOP_AFTER_S [STATE.tgz]   (checkout root; .whl and .kb carried)
#   starts no problem after STOP_AFTER_S seconds and stops the eval at LIMIT s (default 570); STATE.tgz, an
#   earlier call's push.tgz, is resumed from
R=$PWD; S=/tmp/push; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/eval ] && tar xzf "$2" -C $S
F=(level2/92_* level2/36_* level1/18_* level2/29_* level2/85_* level2/19_* level2/38_* level2/50_* level2/43_* level2/23_*
   level2/18_*)
ARGS=(); for f in "${F[@]}"; do ARGS+=(--filter "$f"); done
if [ $SECONDS -lt $STOP ]; then
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) of ${#F[@]} rows"
fi
tail -30 $OUT/logs/push.txt
tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
