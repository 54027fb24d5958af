#!/usr/bin/env bash
# Does a normal torchrun run exit cleanly, every time?
# Runs `torchrun --nproc-per-node 2 -m nnlm train ... --max-steps 100` on the toy world
# N times (default 20) and counts runs that exit non-zero or print a traceback,
# "terminate called" or SIGABRT. Usage: bash bench/neural/torchrun_exits.sh [N]
set -u
cd "$(dirname "$0")/.."
N=${1:-20}
PY=${PYTHON:-.venv/bin/python}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
$PY -m nnlm prepare toy "$T/toy" --train-sentences 600 > /dev/null
fails=0
for i in $(seq 1 "$N"); do
  port=$((29500 + RANDOM % 1000))
  OMP_NUM_THREADS=1 $PY -m torch.distributed.run --nproc-per-node 2 --master-port "$port" \
    -m nnlm train "$T/toy/train.txt" --valid "$T/toy/valid.txt" --preset tiny \
    --max-steps 100 -o "$T/r$i" > "$T/log$i" 2>&1
  rc=$?
  if [ $rc -ne 0 ] || grep -q "terminate called\|Traceback\|SIGABRT" "$T/log$i"; then
    fails=$((fails + 1))
    echo "run $i: exit $rc"; tail -5 "$T/log$i"
  fi
done
echo "$((N - fails)) of $N runs exited cleanly"
