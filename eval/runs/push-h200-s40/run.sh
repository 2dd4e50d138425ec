#!/bin/bash
# #15, session 40, on the GPU machine from the checkout's root (.whl, .kb, .gpu carried):
#   TESTS=EXPR: the recipe-suite GPU tests matching EXPR; SCAN=1: where the suite's cumsum candidate differs from torch (.gpu/scan39.py); GPUTEST=1: the GPU test of the Planner's busy time; SANI=1: compute-sanitizer memcheck over .gpu/sani40.py; DEV=1: development timings (.gpu/s40.py [DEVARGS keys], not product figures);
#   then `kskill eval` over the rows in ONLY (default: L1/34, L1/23 and L2/38, the exchange form),
#   resumable from a state archive. Keep LIMIT well inside the session's GPU budget: a call cut short returns
#   only what is under $OUT (the rows copied out as they finish, not the archive).
# usage: [GPUTEST=1] [SANI=1] [DEV=1] [ONLY="level1/42_* ..."] [LIMIT=570] bash eval/runs/push-h200-s40/run.sh STOP_AFTER_S [STATE.tgz]
R=$PWD; S=/tmp/push; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/eval ] && tar xzf "$2" -C $S
if [ -n "$GPUTEST" ]; then  # -P and another directory: the installed kskill, not the checkout's folders
  (cd /tmp && timeout 180 python3 -P -m pytest -q -p no:cacheprovider -m gpu \
    "$R/tests/gpu/test_reviewer_gpu.py::test_profiled_kernel_time_counts_kernels_side_by_side_once") > $OUT/logs/gputest.txt 2>&1
  echo "gpu test rc=$? at ${SECONDS}s"; tail -5 $OUT/logs/gputest.txt
fi
if [ -n "$TESTS" ]; then  # recipe-suite GPU tests whose names match TESTS
  (cd /tmp && timeout 240 python3 -P -m pytest -q -p no:cacheprovider -m gpu "$R/tests/gpu/test_recipes_gpu.py" -k "$TESTS") > $OUT/logs/tests.txt 2>&1
  echo "tests rc=$? at ${SECONDS}s"; tail -40 $OUT/logs/tests.txt
fi
if [ -n "$SANI" ]; then
  timeout ${SANI_S:-150} compute-sanitizer --tool memcheck --print-limit 20 python3 .gpu/sani40.py > $OUT/logs/sanitizer.txt 2>&1
  echo "sanitizer rc=$? at ${SECONDS}s"; tail -12 $OUT/logs/sanitizer.txt
fi
if [ -n "$SCAN" ]; then
  timeout 120 python3 .gpu/scan39.py > $OUT/logs/scan.txt 2>&1
  echo "scan rc=$? at ${SECONDS}s"; cat $OUT/logs/scan.txt
fi
if [ -n "$DEV" ]; then
  timeout 330 python3 .gpu/s40.py $DEVARGS > $OUT/logs/dev.txt 2>&1
  echo "dev rc=$? at ${SECONDS}s"; cat $OUT/logs/dev.txt
fi
F=(${ONLY:-level1/34_* level1/23_* level2/38_*})
ARGS=(); for f in "${F[@]}"; do ARGS+=(--filter "$f"); done
if [ $SECONDS -lt $STOP ]; then
  # finished rows copied out as they land: a call cut short (the session's GPU budget) still returns them
  mkdir -p $OUT/rows; (while sleep 10; do cp -u $S/eval/rows/*.json $OUT/rows/ 2>/dev/null; done) & COPIER=$!
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) of ${#F[@]} rows"
  kill $COPIER; cp -u $S/eval/rows/*.json $OUT/rows/ 2>/dev/null
fi
tail -30 $OUT/logs/push.txt
tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
