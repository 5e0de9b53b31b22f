#!/usr/bin/env bash
# The tiny-scale runs the book shows, in priority order, one at a time (2 cores: never two trainings at once).
# Each finished run folder is reused by the notebooks (same config hash); commit results/runs/ as they land.
set -u
cd "$(dirname "$0")/.."
MRTPO="${MRTPO:-.venv/bin/mrtpo}"
runs=(
  "--task sql --method gdpo"
  "--task sql --method mrtpo"
  "--task sql --method grpo"
  "--task sql --method joint"
  "--task sql --method shuffled"
  "--task sql --method mrtpo+saw"
  "--task sql --method mrtpo --mrtpo-beta 0.25"
  "--task sql --method mrtpo --mrtpo-beta 0.75"
  "--task sql --method opsd"
  "--task sql --method gdpo+saw"
  "--task sql --method gdpo+constlen"
  "--task sql --method mrtpo+constlen"
  "--task sql --method mrtpo --rewards sub"
  "--task sql --method gdpo --rewards sub"
  "--task tool --method gdpo"
  "--task tool --method mrtpo"
  "--task tool --method grpo"
  "--task if --method gdpo"
  "--task if --method mrtpo"
  "--task if --method grpo"
)
for r in "${runs[@]}"; do
  echo "[book_runs] $(date +%T) $r"
  $MRTPO train $r --model tiny || echo "[book_runs] FAILED: $r"
done
# issue 5's learning criterion: two more GDPO seeds on sql and the untrained base's evaluation
.venv/bin/python benchmarks/tiny_models.py --tasks sql --learning
