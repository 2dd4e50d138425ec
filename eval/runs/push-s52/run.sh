#!/bin/bash
# #15, session 52: eval/runs/push_run.sh with this folder's development scripts (its usage line says the flags);
# the rows come back under $OUT/$EVAL-rows, EVAL=eval by default.
# usage: [DEV="x.py y.py"] [TESTS=EXPR] [ONLY="level1/40_* ..."] [EVAL=NAME] [LIMIT=570] bash eval/runs/push-s52/run.sh STOP_AFTER_S [STATE.tgz]
DIR=eval/runs/push-s52 EVAL=${EVAL:-eval} exec bash eval/runs/push_run.sh "$@"
