#!/bin/bash
# #15, session 34: the rolled pooling form on the GPU (and, in the first calls, an L2-resident rows form for norms
# and softmax that measured slower than the forms it was to replace and was taken out: NOTES.md).
# usage: bash eval/runs/push-h200-s34/run.sh PART [STOP_AFTER_S] [STATE.tgz]   (checkout root; .whl, .kb, .gpu carried)
#   PART check: development timings (.gpu/micro.py), memcheck (.gpu/sani.py)
#   PART eval: `kskill eval` over the problems the rolled pooling reaches and those that could not be captured before
#   (branches over sizes), sample rows first; resumable from STATE.tgz
R=$PWD; S=/tmp/push; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
if [ "$1" = check ]; then
  timeout 200 python3 .gpu/micro.py 2>&1 | tail -60
  echo "micro done at ${SECONDS}s"
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  timeout 200 $SAN --tool memcheck python3 .gpu/sani.py 2>&1 | tail -15
  exit 0
fi
STOP=${2:-450}
[ -n "$3" ] && [ ! -d $S/eval ] && tar xzf "$3" -C $S
F=(level1/42_* level3/29_* level3/26_* level3/9_* level1/46_* level3/34_* level3/30_* level3/46_* level3/47_*)
[ -n "$ONLY" ] && F=($ONLY)  # a later call: only these (the third call: SwinV2 after the torch.full fix, ShuffleNet again)
ARGS=(); for f in "${F[@]}"; do ARGS+=(--filter "$f"); done
if [ $SECONDS -lt $STOP ]; then
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) of ${#F[@]} rows"
fi
tail -30 $OUT/logs/push.txt
tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
