#!/bin/bash
# #15, session 43: eval/runs/push_run.sh with this folder's development scripts (its usage line says the flags).
# usage: [DEV="x.py y.py"] [TESTS=EXPR] [ONLY="level1/40_* ..."] [LIMIT=570] bash eval/runs/push-h200-s43/run.sh STOP_AFTER_S [STATE.tgz]
DIR=eval/runs/push-h200-s43 exec bash eval/runs/push_run.sh "$@"
