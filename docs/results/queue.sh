#!/usr/bin/env bash
# The run queue of the experiments behind docs/RESULTS.md, resumable across kills and sessions:
# docs/results/queue.txt's lines "COMMIT NAME FLAGS..." train `blosa train FLAGS` into runs/NAME,
# one after another, each in a git worktree of COMMIT (/work/wt-at/COMMIT, or $WORKTREES/COMMIT)
# so that edits to the checkout never reach a running job and a row reruns at its commit.
# A line whose runs/NAME/result.json exists is done, and so is one that update.sh copied into
# docs/results (ablation/NAME, or defaults-67/TASK-ENCODER/seed-S for rows-TASK-ENCODER-sS); a
# killed run resumes (--resume).
#   nohup taskset -c 0 bash docs/results/queue.sh w1 >> runs/queue-w1.log 2>&1 &
#   nohup taskset -c 1 bash docs/results/queue.sh w2 >> runs/queue-w2.log 2>&1 &
# Workers share the file: a worker claims a line with runs/.claims/NAME.WORKER (delete a dead
# worker's claims to let another resume its run); a failed run leaves runs/.claims/NAME.failed and
# its output in runs/NAME.out. Stop after the current run: touch runs/PAUSE (every worker) or
# runs/PAUSE-WORKER (one). Then `ABLATION_RUNS=runs bash docs/results/update.sh` copies the
# finished runs into docs/results/ablation/ and prints the tables.
cd "$(dirname "$0")/../.."
ROOT=$PWD
QUEUE=${QUEUE:-$ROOT/docs/results/queue.txt}
WORKTREES=${WORKTREES:-/work/wt-at}
worker=${1:-w1}
export OMP_NUM_THREADS=1
export BLOSA_DATA=${BLOSA_DATA:-$(cd "$ROOT/../shared/data" && pwd)}
mkdir -p runs/.claims
while true; do
  if [ -e runs/PAUSE ] || [ -e "runs/PAUSE-$worker" ]; then echo "$(date -u +%T) paused"; exit 0; fi
  picked=""
  while read -r commit name flags; do
    if [ -z "$commit" ] || [ "${commit:0:1}" = "#" ]; then continue; fi
    row=${name#rows-}; copied="docs/results/defaults-67/${row%-s*}/seed-${row##*-s}"
    [ "$row" = "$name" ] && copied="docs/results/ablation/$name"
    if [ -e "runs/$name/result.json" ] || [ -e "$copied/result.json" ] \
       || [ -e "runs/.claims/$name.failed" ]; then continue; fi
    if ! ls runs/.claims/"$name".* >/dev/null 2>&1 || [ -e "runs/.claims/$name.$worker" ]; then
      touch "runs/.claims/$name.$worker"; picked="$commit $name $flags"; break
    fi
  done < "$QUEUE"
  if [ -z "$picked" ]; then echo "$(date -u +%T) queue empty"; exit 0; fi
  read -r commit name flags <<< "$picked"
  tree=$WORKTREES/$commit
  if [ ! -d "$tree" ]; then
    mkdir -p "$WORKTREES"
    git worktree add --detach "$tree" "$commit" >/dev/null
    cp python/blosa/_C*.so "$tree/python/blosa/"  # the extension as built here (make build)
  fi
  echo "$(date -u +%T) start $name @ $commit: $flags"
  start=$(date +%s)
  # shellcheck disable=SC2086
  (cd "$tree" && PYTHONPATH="$tree/python" "$ROOT/.venv/bin/python" -m blosa train $flags \
     --out "$ROOT/runs/$name" --resume --quiet) > "runs/$name.out" 2>&1
  rc=$?
  echo "$(date -u +%T) end $name rc=$rc $(( $(date +%s) - start ))s $(tail -1 "runs/$name.out")"
  if [ $rc != 0 ]; then touch "runs/.claims/$name.failed"; fi
done
