#!/usr/bin/env bash
# GPU check of the paper-scale path (issue 15), prepared to run in under 8 minutes on one H200:
# a from-scratch 0.5B rehearsal base (Qwen2.5-0.5B's shape, 151,936-token vocabulary, bf16), GDPO vs MRTPO vs
# joint step time in one run, and js_relevance's peak memory at V=151,936, T=2,048, K=8.
# Writes results/bench/gpu_check.csv. Needs: a CUDA build of torch and this package installed (`pip install -e .`).
# Usage: benchmarks/gpu_check.sh            (PYTHON=/path/to/python to choose the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: no CUDA device visible to torch')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# 7.5 min hard limit; the script stops starting new rounds after 6 min of its own budget
timeout 450 "$PYTHON" benchmarks/gpu_check.py --shape 0.5b --budget-s 330 "$@"
test -s results/bench/gpu_check.csv
cat results/bench/gpu_check.csv
