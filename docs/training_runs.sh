#!/usr/bin/env bash
# One run of `blosa train` per task, as docs/TRAINING.md's table reports them, then that table
# (`blosa report`). Sized for a 2-core CPU machine: small hidden sizes and few epochs, so each run
# takes minutes; the paper's full setups are `blosa train --task T` with its defaults.
# Usage: bash docs/training_runs.sh [RUNS_DIR] (default runs/table); PY=python to choose python.
# Two runs at a time (JOBS), each on one core. SNLI and SQuAD use small files in their official
# formats (tests/small_data.py), the real ones not being reachable here.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-runs/table}
PY=${PY:-.venv/bin/python}
JOBS=${JOBS:-2}
mkdir -p "$RUNS"
$PY tests/small_data.py "$RUNS/small-data"

small="--hidden 100 --optimizer adam --lr 1e-3 --dropout 0.4"
commands=(
  "sst1   --task sst1 $small --epochs 1 --eval-every 500"
  "sst2   --task sst2 $small --epochs 1 --eval-every 400"
  "cr     --task cr $small --epochs 4"
  "mpqa   --task mpqa $small --epochs 3"
  "subj   --task subj $small --epochs 2"
  "sick   --task sick $small --epochs 8"
  "sick_e --task sick_e $small --epochs 8"
  "snli   --task snli --data-dir $RUNS/small-data $small --epochs 10"
  "squad  --task squad --data-dir $RUNS/small-data --vectors glove-50d $small --epochs 10"
  "trec   --task trec --hidden 150 --optimizer adam --lr 1e-3 --dropout 0.4 --epochs 20"
)
run() {
  local name=$1; shift
  [ -f "$RUNS/$name/result.json" ] && return 0
  OMP_NUM_THREADS=1 $PY -m blosa train "$@" --out "$RUNS/$name" --resume --quiet \
    > "$RUNS/$name.log" 2>&1 || { echo "$name failed: see $RUNS/$name.log" >&2; return 1; }
}
for entry in "${commands[@]}"; do
  # shellcheck disable=SC2086
  run $entry &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait
$PY -m blosa report $(for entry in "${commands[@]}"; do echo "$RUNS/${entry%% *}"; done)
