#!/bin/bash
# #15, session 41, on the GPU machine from the checkout's root (.whl, .kb carried). Development steps first:
#   SAND=1: sand41.py (L2/38's kept module in and out of the eval's sandbox); T38=1: timing38.py (the same module
#   under the worker's timing, alone and beside the others); POOL=1, DW=1, DW2=1, DW3=1: pool_dev.py (the vector form of the rolled pooling, of the depthwise convolution); REREAD=1: push-h200-s40/reread_dev.py (the
#   norms' streamed pipelined form); NCU=1: push-h200-s40/pool_ncu.py under Nsight Compute; TESTS=EXPR: recipe-suite GPU
#   tests matching EXPR; SANI=1: compute-sanitizer memcheck over sani41.py;
#   then `kskill eval` over the rows in ONLY (none by default), resumable from a state archive. Keep LIMIT well
#   inside the session's GPU budget: a call cut short returns only what is under $OUT.
# usage: [SAND=1] [REREAD=1] [NCU=1] [TESTS=EXPR] [ONLY="level1/40_* ..."] [LIMIT=570] bash eval/runs/push-h200-s41/run.sh STOP_AFTER_S [STATE.tgz]
R=$PWD; S=/tmp/push; D=$R/eval/runs/push-h200-s41; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/eval ] && tar xzf "$2" -C $S
step() {  # step NAME SECONDS COMMAND...: output to $OUT/logs/NAME.txt, shown
  local name=$1 limit=$2; shift 2
  timeout $limit "$@" > $OUT/logs/$name.txt 2>&1
  echo "$name rc=$? at ${SECONDS}s"; tail -${TAIL:-60} $OUT/logs/$name.txt
}
[ -n "$SAND" ] && step sand 200 python3 -P $D/sand41.py
[ -n "$REREAD" ] && step reread 300 python3 -P $R/eval/runs/push-h200-s40/reread_dev.py
[ -n "$T38" ] && step timing38 150 python3 -P $D/timing38.py
[ -n "$POOL" ] && step pool 200 python3 -P $D/pool_dev.py pool
[ -n "$DW" ] && step dw 200 python3 -P $D/pool_dev.py dw
[ -n "$DW2" ] && step dw2 200 python3 -P $D/pool_dev.py dw2
[ -n "$DW3" ] && step dw3 200 python3 -P $D/pool_dev.py dw3
[ -n "$NCU" ] && step ncu 150 ncu --kernel-name regex:_pool --launch-skip 2 --launch-count 1 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
  --section SourceCounters python3 -P $R/eval/runs/push-h200-s40/pool_ncu.py
[ -n "$SANI" ] && step sanitizer ${SANI_S:-150} compute-sanitizer --tool memcheck --print-limit 20 python3 -P $D/sani41.py
[ -n "$TESTS" ] && (cd /tmp && step tests ${TESTS_S:-240} python3 -P -m pytest -q -p no:cacheprovider -m gpu "$R/tests/gpu/test_recipes_gpu.py" -k "$TESTS")
if [ -n "$ONLY" ] && [ $SECONDS -lt $STOP ]; then
  ARGS=(); for f in $ONLY; do ARGS+=(--filter "$f"); done
  mkdir -p $OUT/rows; (while sleep 10; do cp -u $S/eval/rows/*.json $OUT/rows/ 2>/dev/null; done) & COPIER=$!
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) rows"
  kill $COPIER; cp -u $S/eval/rows/*.json $OUT/rows/ 2>/dev/null
  tail -30 $OUT/logs/push.txt
  tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
fi
