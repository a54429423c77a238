#!/usr/bin/env bash
# Copy the finished runs of `make reproduce` (runs/reproduce/ROW/seed-S) into docs/results/ROW/
# seed-S (config.json and result.json: what `blosa report` reads; no checkpoints), then print
# docs/RESULTS.md's tables from the copies: Bi-BloSAN's rows (preset best), the other setups tried
# (preset paper; ROW-best-VARIANT folders: the preset with flags added), then the encoders side by
# side per task (preset best).
# Usage: bash docs/results/update.sh [RUNS] (default runs/reproduce); PY=python to choose;
# ABLATION_RUNS=runs also copies the finished runs of docs/results/queue.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-runs/reproduce}
PY=${PY:-.venv/bin/python}
for run in "$RUNS"/*/seed-*/; do
  [ -f "$run/result.json" ] || continue
  row=${run#"$RUNS"/}
  mkdir -p "docs/results/$row"
  cp "$run/config.json" "$run/result.json" "docs/results/$row"
done
# Issue 67's ablation (docs/RESULTS.md "What moves dev accuracy"): the runs of docs/results/
# queue.txt, copied from runs/NAME into docs/results/ablation/NAME by ABLATION_RUNS=runs.
# Its "rows-TASK-ENCODER-sSEED" lines are the rows rerun under issue 67's defaults: copied into
# docs/results/defaults-67/TASK-ENCODER/seed-SEED and printed as a table of their own (a row is
# not mixed with the seeds run under the former defaults).
if [ -n "${ABLATION_RUNS:-}" ]; then
  for run in "$ABLATION_RUNS"/*/; do
    [ -f "$run/result.json" ] || continue
    name=$(basename "$run")
    grep -q " $name " docs/results/queue.txt || continue
    case $name in
      rows-*) row=${name#rows-}; dest="docs/results/defaults-67/${row%-s*}/seed-${row##*-s}" ;;
      *) dest="docs/results/ablation/$name" ;;
    esac
    mkdir -p "$dest"
    cp "$run/config.json" "$run/result.json" "$dest"
  done
fi
rows() { ls -d docs/results/$1/seed-* 2>/dev/null | sort -V || true; }
TASKS="trec sst1 sst2 cr mpqa subj sick sick_e"
echo "### Bi-BloSAN"
echo
# shellcheck disable=SC2046
$PY -m blosa report --dev --paper $(for task in $TASKS; do rows "$task-biblosan-best"; done)
tried=$(for task in $TASKS; do rows "$task-biblosan-paper"; rows "$task-biblosan-best-*"; done)
if [ -n "$tried" ]; then
  echo
  echo "### Bi-BloSAN: other setups tried"
  echo
  # shellcheck disable=SC2086
  $PY -m blosa report --dev --paper $tried
fi
for task in trec sst2; do
  others=$(rows "$task-*" | grep -v -- "-biblosan-" || true)
  [ -n "$others" ] || continue
  echo
  echo "### $task: the encoders side by side"
  echo
  # shellcheck disable=SC2086
  $PY -m blosa report --dev --paper $(rows "$task-biblosan-best") $others
done
if ls -d docs/results/defaults-67/*/seed-*/ >/dev/null 2>&1; then
  echo
  echo "### The rows under issue 67's defaults"
  echo
  # shellcheck disable=SC2046
  $PY -m blosa report --dev --paper $(ls -d docs/results/defaults-67/*/seed-*/ | sort -V)
fi
if ls -d docs/results/ablation/*/ >/dev/null 2>&1; then
  echo
  echo "### One factor at a time (blosa report --ablation)"
  echo
  # shellcheck disable=SC2046
  # Its runs were made when the vocabulary's default was the training words' and Bi-BloSAN's
  # block length "auto": that is the control (issue 67 made the whole vocabulary and the
  # dataset's block length the defaults, after these cells).
  $PY -m blosa report --ablation --ablation-base vocab=train --ablation-base block_len=auto \
    $(ls -d docs/results/ablation/*/ | sort -V)
fi
