#!/bin/bash
# #15, session 35: `kskill eval` again over kb60 rows that need a current measurement: the two GRUs whose CUDA-graph
# candidates had been rejected by the profiler cross-check before it counted overlapping kernels once, then the rows
# whose commit was not recorded. Resumable across calls from a state archive.
# usage: bash eval/runs/push-h200-s35/run.sh [STOP_AFTER_S] [STATE.tgz]   (checkout root; .whl, .kb, .gpu carried)
R=$PWD; S=/tmp/push; mkdir -p $OUT/logs $S
source $R/eval/runs/setup_gpu.sh
STOP=${1:-450}
[ -n "$2" ] && [ ! -d $S/eval ] && tar xzf "$2" -C $S
F=(level3/40_* level3/42_* level1/30_* level1/94_* level2/68_* level1/65_* level1/79_* level1/84_* level1/34_*
   level2/55_* level1/97_* level3/25_*)
[ -n "$ONLY" ] && F=($ONLY)  # later calls: the rows still on the oldest commits (673fd12, 0bbd754)
ARGS=(); for f in "${F[@]}"; do ARGS+=(--filter "$f"); done
if [ $SECONDS -lt $STOP ]; then
  timeout -k 10 $((${LIMIT:-570} - SECONDS)) kskill eval run $R/.kb "${ARGS[@]}" --time-limit 60 --workers 1 --out $S/eval \
    --resume --stop-after $((STOP - SECONDS)) >> $OUT/logs/push.txt 2>&1
  echo "eval rc=$? at ${SECONDS}s: $(ls $S/eval/rows 2>/dev/null | wc -l) of ${#F[@]} rows"
fi
tail -30 $OUT/logs/push.txt
tar czf $OUT/push.tgz --exclude='*.pt' --exclude=kh -C $S .
