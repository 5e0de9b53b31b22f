#!/usr/bin/env bash
# The book's evidence grid (issue 19) at the tiny default, then the real model's runs (issue 40), in priority order,
# one run at a time (2 cores: never two trainings at once). The plan and its order live in benchmarks/book_runs.py.
#
#   benchmarks/book_runs.sh --dry-run        # list every run (done or missing) and the estimated compute
#   benchmarks/book_runs.sh [--seeds N]      # train the missing runs (default 3 seeds per arm, 5 for instruction following)
#   benchmarks/book_runs.sh --section 'positive control'   # only one section of the grid
#                                            # (and MRTPO / GDPO at the seeds their difference needs: book_runs.py)
#
# Restartable: a finished run folder (same config hash) is reused, and a run killed mid-way resumes from its last
# checkpoint when asked again, so stop it at any time and start it again. Commit results/runs/ as runs land.
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
MRTPO="${MRTPO:-.venv/bin/mrtpo}"
seeds=3
dry=0
section=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --seeds) seeds="$2"; shift ;;
    --section) section=(--section "$2"); shift ;;
    *) echo "usage: $0 [--dry-run] [--seeds N] [--section NAME]" >&2; exit 2 ;;
  esac
  shift
done
if [ "$dry" = 1 ]; then
  exec "$PY" benchmarks/book_runs.py --dry-run --seeds "$seeds" "${section[@]}"
fi
missing=$("$PY" benchmarks/book_runs.py --missing --seeds "$seeds" "${section[@]}") || exit 1
total=$(printf '%s\n' "$missing" | grep -c . || true)
echo "[book_runs] $total runs to train"
i=0
while IFS= read -r r; do
  [ -z "$r" ] && continue
  i=$((i + 1))
  echo "[book_runs] $(date +%T) ($i/$total) mrtpo train $r"
  # word splitting of $r is intended: it holds the run's arguments
  # shellcheck disable=SC2086
  $MRTPO train $r || echo "[book_runs] FAILED: $r"
done <<< "$missing"
