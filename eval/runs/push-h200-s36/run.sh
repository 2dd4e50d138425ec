#!/bin/bash
# #15, session 36: `kskill eval` over the kb60 rows whose code the row exchange form (templates/exchange.py) or
# the rolled pooling's new defaults change, after compute-sanitizer memcheck over one small case of each form.
# Resumable across calls from a state archive.
# usage: bash eval/runs/push-h200-s36/run.sh [STOP_AFTER_S] [STATE.tgz]   (checkout root; .whl, .kb, .gpu carried)
R=$PWD; S=/tmp/push; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/eval ] && tar xzf "$2" -C $S
if [ -z "$NOSANI" ]; then
  timeout 150 compute-sanitizer --tool memcheck --print-limit 20 python3 .gpu/sani.py > $OUT/logs/sanitizer.txt 2>&1
  echo "sanitizer rc=$? at ${SECONDS}s"; tail -12 $OUT/logs/sanitizer.txt
fi
F=(level1/23_* level1/34_* level1/42_* level2/17_* level2/83_* level2/85_* level2/92_* level2/38_* level3/9_* level3/26_*)
[ -n "$ONLY" ] && F=($ONLY)
ARGS=(); for f in "${F[@]}"; do ARGS+=(--filter "$f"); done
if [ $SECONDS -lt $STOP ]; then
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) of ${#F[@]} rows"
fi
tail -30 $OUT/logs/push.txt
tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
