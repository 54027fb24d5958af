#!/usr/bin/env bash
# The awd preset's recipe trained on one GPU, then scored static and adapted on Brown test:
# the GPU rows of docs/deep.md and docs/results.md. Needs data/brown and runs/kn5 (KN5 of
# data/brown/train.txt); writes its logs, metrics and JSON under OUT (default runs/gpu_awd).
#
#   bash bench/neural/gpu_awd.sh [STEP...]      # steps: smoke train adaptation tests (default: all)
#
# Each step has a time limit, so the whole script fits a bounded loan of a GPU machine:
#   smoke       one epoch on 100 kB; stops the script if CUDA training fails
#   train       the preset's recipe, stopped with Ctrl-C's signal after TRAIN_SECONDS (280)
#               if it has not stopped itself (it keeps its best model and its metrics);
#               then the test perplexity
#   adaptation  bench/neural/adaptation.py on the trained model (ADAPT_SECONDS, 240)
#   tests       tests/test_cuda.py (TEST_SECONDS, 150)
# DEVICE=cpu makes a dry run of the script itself.
set -u
OUT=${OUT:-runs/gpu_awd}
DEVICE=${DEVICE:-cuda}
STEPS=${*:-smoke train adaptation tests}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
stamp() { echo "== $(date +%T) $*"; }

stamp build
python3 setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 || tail -5 "$OUT/build.log"
[ "$DEVICE" = cpu ] || nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"

for step in $STEPS; do
  stamp "$step"
  case $step in
    smoke)
      head -c 100000 data/brown/train.txt >/tmp/smoke.txt
      timeout 90 python3 -m nnlm train /tmp/smoke.txt --valid data/brown/valid.txt \
          -o /tmp/smoke --preset awd --epochs 1 --device "$DEVICE" 2>&1 | tail -3
      [ -f /tmp/smoke/model.safetensors ] || { echo "smoke run failed: stopping"; exit 3; } ;;
    train)
      rm -rf /tmp/awd
      timeout -s INT "${TRAIN_SECONDS:-280}" python3 -m nnlm train data/brown/train.txt \
          --valid data/brown/valid.txt -o /tmp/awd --preset awd --device "$DEVICE" \
          2>&1 | tee "$OUT/train.log"
      cp /tmp/awd/metrics.csv "$OUT/awd_metrics.csv"
      python3 -m nnlm eval /tmp/awd data/brown/test.txt --device "$DEVICE" --json \
          >"$OUT/awd_test.json" && cat "$OUT/awd_test.json" ;;
    adaptation)
      timeout "${ADAPT_SECONDS:-240}" python3 bench/neural/adaptation.py /tmp/awd --kn runs/kn5 \
          --data data/brown --device "$DEVICE" --out "$OUT/adaptation_cuda.json" 2>&1 \
          | grep -v "^  " | tail -15 ;;
    tests)
      timeout "${TEST_SECONDS:-150}" python3 -m pytest tests/test_cuda.py -q -p no:cacheprovider \
          --durations=5 2>&1 | tail -12 ;;
    *) echo "unknown step $step (smoke, train, adaptation, tests)"; exit 2 ;;
  esac
done
stamp done
