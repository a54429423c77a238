#!/usr/bin/env bash
# `make gpu-check`: one command for a CUDA machine whose python3 already has torch, triton,
# pytest and pytest-benchmark (no venv, no network). Builds blosa in place against that torch,
# runs the GPU tests and the kernel benchmark, and prints a short table last.
# Logs land in $OUT when it is set (the device tool's folder), else in /tmp/blosa-gpu-check.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
LOG=${OUT:-/tmp/blosa-gpu-check}
mkdir -p "$LOG"
export BLOSA_CUDA=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1

{
  date -u +"date %Y-%m-%dT%H:%MZ"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  $PY -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} | tee "$LOG/device.txt"

echo "== build"
start=$SECONDS
if ! $PY -m pip install --no-build-isolation --no-deps -e . > "$LOG/build.log" 2>&1; then
  tail -60 "$LOG/build.log"
  exit 1
fi
echo "built in $((SECONDS - start)) s"

echo "== GPU tests"
timeout 330 $PY -m pytest tests/test_cuda.py tests/triton -q -rs --maxfail=20 -p no:cacheprovider \
  --junitxml="$LOG/tests.xml" 2>&1 | tee "$LOG/tests.log" | tail -40
tests_status=${PIPESTATUS[0]}

echo "== kernel rates"
timeout 150 $PY bench/gpu_rates.py --out "$LOG/rates.json" 2>&1 | tee "$LOG/rates.md"
rates_status=${PIPESTATUS[0]}

echo "tests exit $tests_status, rates exit $rates_status"
exit $(( tests_status || rates_status ))
