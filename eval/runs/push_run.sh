#!/bin/bash
# #15's push runs on the GPU machine, from the checkout's root (.whl, .kb carried); each session's run.sh calls it
# with DIR, its folder (where its development scripts are). Development steps first:
#   DEV="A.py B.py": scripts of DIR (DEV_ARG: their argument); TESTS=EXPR: recipe-suite GPU tests matching EXPR;
#   SANI=SCRIPT: compute-sanitizer memcheck over a script of DIR;
#   then `kskill eval` over the rows in ONLY (none by default) into $S/$EVAL (eval by default; the rows come back under
#   $OUT/$EVAL-rows when EVAL is set, else $OUT/rows), resumable from a state archive. Keep LIMIT well inside the
#   session's GPU budget: a call cut short returns only what is under $OUT.
# usage: DIR=eval/runs/NAME [DEV="x.py y.py"] [TESTS=EXPR] [ONLY="level1/40_* ..."] [EVAL=NAME] [LIMIT=570]
#        bash eval/runs/push_run.sh STOP_AFTER_S [STATE.tgz]
R=$PWD; S=/tmp/push; E=${EVAL:-eval}; ROWS=$OUT/${EVAL:+$EVAL-}rows; D=$R/$DIR; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/$E ] && tar xzf "$2" -C $S
step() {  # step NAME SECONDS COMMAND...: output to $OUT/logs/NAME.txt, shown
  local name=$1 limit=$2; shift 2
  timeout $limit "$@" > $OUT/logs/$name.txt 2>&1
  echo "$name rc=$? at ${SECONDS}s"; tail -${TAIL:-60} $OUT/logs/$name.txt
}
for dev in $DEV; do step ${dev%.py}${DEV_ARG:+_$DEV_ARG} ${DEV_S:-300} python3 -P $D/$dev $DEV_ARG; done
[ -n "$SANI" ] && step sanitizer ${SANI_S:-150} compute-sanitizer --tool memcheck --print-limit 20 python3 -P $D/$SANI
[ -n "$TESTS" ] && (cd /tmp && step tests ${TESTS_S:-240} python3 -P -m pytest -q -p no:cacheprovider -m gpu "$R/tests/gpu/test_recipes_gpu.py" -k "$TESTS")
if [ -n "$ONLY" ] && [ $SECONDS -lt $STOP ]; then
  ARGS=(); for f in $ONLY; do ARGS+=(--filter "$f"); done
  mkdir -p $ROWS; (while sleep 10; do cp -u $S/$E/rows/*.json $ROWS/ 2>/dev/null; done) & COPIER=$!
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/$E \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/$E/rows 2>/dev/null | wc -l) rows"
  kill $COPIER; cp -u $S/$E/rows/*.json $ROWS/ 2>/dev/null
  tail -30 $OUT/logs/push.txt
  tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
  # the store's own logs (its data stays): a run that waited on the store says so there (push-h200-s49, call 1)
  (cd $S && find kh -name '*.log' | tar czf $OUT/store-logs.tgz -T -)
fi
