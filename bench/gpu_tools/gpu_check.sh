#!/usr/bin/env bash
# `make gpu-check`: one command for a CUDA machine whose python3 already has torch, triton,
# pytest and pytest-benchmark (no venv, no network). Builds blosa in place against that torch,
# runs the GPU tests and the kernel benchmark, and prints a short table last.
# Logs land in $OUT when it is set (the device tool's folder), else in /tmp/blosa-gpu-check:
# device.txt, rates.md, rates.json, tests_cuda.log, cuda_errors.json, tests_triton.log, ncu.txt,
# table2.md (eight files: the most the device tool returns).
# Steps run measurements first (build, kernel rates, host overhead with HOST_OVERHEAD=1, Nsight
# Compute), then the CUDA tests beside the Triton ones in TRITON_SHARDS processes
# (BLOSA_TEST_SHARD, tests/shards.py), each under its own timeout (RATES_TIMEOUT, NCU_TIMEOUT,
# NCU_TRITON_TIMEOUT, CUDA_TESTS_TIMEOUT, TRITON_TESTS_TIMEOUT) cut to
# what is left of BUDGET seconds for the whole check (default 570, inside a 10-minute device
# call), so that it always ends with its tables, whatever a step costs on the day; a step with
# under 20 s left is skipped. A step out of time gets SIGINT first, on which pytest prints its
# summary of the tests it ran and gpu_rates.py its tables of the jobs it measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
LOG=${OUT:-/tmp/blosa-gpu-check}
mkdir -p "$LOG"
export BLOSA_CUDA=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} PYTHONUNBUFFERED=1

{
  date -u +"date %Y-%m-%dT%H:%MZ"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  # The device's copy of .git can lag its working tree: this hash of the sources names the
  # tree itself (run the same line in a checkout to match it to a commit).
  echo "sources $(bash bench/gpu_tools/source_hash.sh)"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  $PY -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} | tee "$LOG/device.txt"

# Each step's start goes to device.txt too, for sizing the next check's budget.
step() { echo "== $1 (at ${SECONDS}s)" | tee -a "$LOG/device.txt"; }
BUDGET=${BUDGET:-570}
# 8: the shards are contiguous slices of the suite (each compiles only its own tests' kernels),
# and test_triton_no_lse.py, the slowest on the GPU (43 tests in 166 s on 2026-11-27), is 53
# tests near its end: with 6 shards all of them would fall in the last.
TRITON_SHARDS=${TRITON_SHARDS:-8}
# limit WANT: WANT seconds, or what is left of BUDGET less 15 s for the tables if that is less.
limit() {
  local left=$((BUDGET - SECONDS - 15))
  echo $(( left < $1 ? left : $1 ))
}
# timed NAME WANT COMMAND...: COMMAND under `timeout $(limit WANT)` (SIGINT, then SIGKILL 15 s
# later), or skipped (status 124) when under 20 s are left.
timed() {
  local name=$1 seconds
  seconds=$(limit "$2")
  shift 2
  if (( seconds < 20 )); then
    echo "skipped $name: ${seconds}s of the budget left"
    return 124
  fi
  timeout -s INT -k 15 "$seconds" "$@"
}

step build
# In place, without pip: the GPU machines have no package index for pip's build requirements.
start=$SECONDS
if ! $PY setup.py build_ext --inplace > "$LOG/build.log" 2>&1; then
  tail -60 "$LOG/build.log"
  exit 1
fi
rm "$LOG/build.log"  # the device tool brings back at most 8 files; the others matter more
export PYTHONPATH="$PWD/python:$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "built in $((SECONDS - start)) s"

step "kernel rates"
# Variants not yet measured, most promising first (a step cut short keeps the jobs it
# measured): CUDA's dense r = 8 kernels staged through shared memory, each block's rows moved as
# 16-byte vectors (small-staged; BLOSA_CUDA_SMALL_STAGED), for the r = 8 training step, whose
# backward kept L2 86% busy for DRAM's 53% (its forward+backward rows against the default's
# give the whole change, its forward rows the forward's), one block a thread block and eight in
# turn (staged-blocks8: the 3072 blocks in one wave of 384 thread blocks, each block's copy
# overlapping the math of the one before); CUDA's d_bias column sums in one launch of tall
# thread blocks instead of two (sums-one; BLOSA_CUDA_COLUMN_SUMS), 0.005 ms of the bfloat16
# r = 8 training step's 0.058. Triton's fused backward with its trimmed key loop
# (fused-trimmed; configs.FUSED_STEP), for the one-block training step 12% short of 0.5e12
# elements/s, whose fused backward (1.93 of its 3.19 ms, issue slots 64.5% busy) it takes from
# 197 to 167 instructions a key (triton 3.6, the autotuner's pick, no mask); Triton's per-pair
# kernels compiled for the call's d (pairs-static-d; configs.PAIRS_STATIC_D), their rows' offsets
# constants: the dense bfloat16 r = 8 forward 464 -> 376 instructions and its backward 736 ->
# 680, for the r = 8 forward 5% short of 1.3e12 and the training step 22% short of 0.5e12, and
# its autotuner's wide shapes (configs.PAIRS_WIDE_CONFIGS: 2 or 4 elements a thread, each row
# moved as a 4- or 8-byte vector a thread instead of 2 bytes; 312-332 instructions an element
# forward, 592 backward);
# Triton's row-tile forward taking every other key's 16-bit exp2 from a polynomial on the FMA
# pipe (rows-poly; configs.ROWS_EXP2), for its one-block bfloat16 forward, 0.5-1% short of
# 1.3e12 with the special-function unit its bound. Last, to confirm what the third run of
# 2026-11-28 measured once, the defaults before it: CUDA's dense 16-bit forward dividing by the
# special-function unit's reciprocal (rcp-mufu; BLOSA_CUDA_SMALL_RCP), Triton's d_bias by
# ATen's sum with the per-pair kernels dividing (bias-sum+rcp-div; configs.BIAS_SUM,
# configs.PAIRS_RECIPROCAL).
# The others (CUDA general, loads-later, stream, split, stream+split, tile4,
# vec2, persistent, persistent+vec2; Triton split, per-block, general, fast32) gave the same
# verdict on two or three H200 runs
# (bench/HISTORY.md) and take `--cuda-variants` / `--triton-variants` by hand: their time goes
# to the tests. Up to 240 s (of the 69 s the host lines no longer take): 120 s on 2026-11-28
# with three variants; fused-trimmed first compiles the fused backward's five autotune shapes
# for new keys (two dtypes), pairs-static-d the per-pair kernels' six (forward) and five
# (backward) for d = 300 (two dtypes), rows-poly the row-tile forward's eight for two new keys.
timed rates ${RATES_TIMEOUT:-240} $PY bench/gpu_tools/gpu_rates.py --out "$LOG/rates.json" \
  --cuda-variants small-staged,small-staged+staged-blocks8,sums-one,rcp-mufu \
  --triton-variants fused-trimmed,pairs-static-d,rows-poly,bias-sum+rcp-div > "$LOG/rates.md" 2>&1
rates_status=$?

# Host time per call at B=1 (bench/gpu_tools/host_overhead.py), before the tests load the CPU, only with
# HOST_OVERHEAD=1: the CUDA op (what `auto` takes on a GPU) and one ATen op (the machine's
# floor) took 69 s of the third run of 2026-11-28 and gave the same picture as the two before
# (bench/HISTORY.md, with the Triton op's lines, which went by hand before), so their time goes
# to the tests, which that run cut short.
if [ "${HOST_OVERHEAD:-0}" = 1 ]; then
  step "host overhead"
  for backend in auto baseline; do
    timed "host overhead ($backend)" 30 $PY bench/gpu_tools/host_overhead.py --device cuda \
      --backend $backend --calls 300 >> "$LOG/rates.md" 2>&1
  done
fi

# Which unit holds each kernel back: Nsight Compute's summary sections (CUDA: the r = 8 training
# kernels dense and general, d_bias's column sums, the one-block kernels, the one-block forward
# with padding, the fused backward, the staged forward, the r = 8 dense ones staged through
# shared memory; Triton: bench/gpu_tools/ncu_kernels.py --backend triton), where ncu can read the
# counters (not on every machine; a failure here does not fail the check). MemoryWorkloadAnalysis:
# L1 and L2 hit rates and how busy each memory unit is, for the r = 8 kernels, whose L2 was
# 72-86% busy for 44-53% of DRAM's bandwidth on 2026-11-28 (a warp's 16-bit load or store of a
# row, 64 bytes at a 600-byte row pitch, is mostly not aligned to 32-byte sectors;
# bench/HISTORY.md). And why warps waited (the stall reasons, which WarpStateStats collects but
# prints only as a chart: asked for as metrics, they print as numbers), which tells whether a
# kernel waits on memory, on the special-function unit or on its own dependencies;
# bench/gpu_tools/ncu_stalls.py makes one line of each launch.
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
          --section Occupancy --section MemoryWorkloadAnalysis)
STALLS=(--metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio')
if [ -n "$NCU" ]; then
  step "ncu ($NCU)"
  cuda_ncu() {
    timed ncu ${NCU_TIMEOUT:-60} "$NCU" --clock-control none --kernel-name regex:'_small|_tiled|_sums|_staged' \
      --launch-count 15 "${SECTIONS[@]}" "${STALLS[@]}" $PY bench/gpu_tools/ncu_kernels.py > "$LOG/ncu.txt" 2>&1
  }
  cuda_ncu
  ncu_status=$?
  # The stall metrics were first asked for on 2026-11-29, of an ncu not seen yet: if it refuses
  # them, the sections alone, as before.
  if (( ncu_status != 0 )) && grep -q "^==ERROR==.*[Mm]etric" "$LOG/ncu.txt"; then
    grep "^==ERROR==" "$LOG/ncu.txt" | head -3
    STALLS=()
    cuda_ncu
    ncu_status=$?
  fi
  echo "ncu exit $ncu_status (report in ncu.txt)"
  # Then the Triton kernels (fwd_pairs, bwd_pairs, fwd_rows, bwd_fused, bwd_dkv_sums, fwd_rows
  # in float32, and the one-block step with the trimmed fused backward), appended
  # to the same file (the device tool brings back eight): only those launched inside the NVTX
  # range blosa_ncu, after the autotuner's trial launches.
  echo "== Triton kernels" >> "$LOG/ncu.txt"
  timed "ncu (Triton)" ${NCU_TRITON_TIMEOUT:-60} "$NCU" --clock-control none --nvtx \
    --nvtx-include 'blosa_ncu/' --kernel-name regex:'fwd_|bwd_' --launch-count 9 \
    "${SECTIONS[@]}" "${STALLS[@]}" $PY bench/gpu_tools/ncu_kernels.py --backend triton >> "$LOG/ncu.txt" 2>&1
  echo "ncu (Triton) exit $?"
  $PY bench/gpu_tools/ncu_stalls.py "$LOG/ncu.txt" --top 3 | cut -c1-160
fi

# The special-function ceiling (bench/gpu_tools/sfu_peak.py: 3.6-3.7e12 tanh or exp2 a second, 86-88% of
# nominal) and the d_bias reduction forms (bench/gpu_tools/bias_reduce.py) are known from the H200 runs of
# 2026-11-27 and 28 (bench/HISTORY.md): by hand now, their time goes to the tests.

# The paper's Table 2 (issue 60; python -m blosa.bench.table2): every encoder's time per SNLI
# epoch from 200 training steps, its training memory and the inference time, beside the paper's;
# bench/RESULTS.md records it per card. Before the tests, which load every core.
step "Table 2"
timed table2 ${TABLE2_TIMEOUT:-120} $PY -m blosa.bench.table2 --device cuda \
  --out "$LOG/table2.md" > /dev/null 2>&1
echo "table2 exit $? ($LOG/table2.md)"

step "GPU tests (CUDA, and Triton in $TRITON_SHARDS shards, side by side)"
# Every suite process at once on the GPU: they spend their time compiling (Inductor for the
# torch.compile tests, triton for its kernels, one core a process, 16 cores here), so together
# they take about the longest one's time. On 2026-11-27 the CUDA suite ran 1031 tests in 148 s,
# and the Triton suite in one process 189 of its 420 in 233 s, the rest cut off. Without
# test_triton_compiles.py: it compiles every kernel for sm_90 without running it, for CI's
# machines without a GPU (about 40 s); here the other tests compile and run them all. Without
# test_triton_settings.py either: it checks settings in interpreter subprocesses, no GPU
# involved; nor test_triton_bench_scripts.py, which checks which kernels bench/gpu_tools/ncu_kernels.py
# launches (the same on any device). No test times anything, and the memory tests read their
# own process's allocator. tests/test_functorch.py (torch.func over the op, CPU and CUDA: a few
# seconds) and tests/test_cuda_graphs.py (CUDA graph capture, both backends; one Inductor
# compile, not yet run on a GPU) go first, so that the long CUDA suites' end being cut cannot
# skip them.
BLOSA_CUDA_ERR_LOG="$LOG/cuda_errors.json" timed "CUDA tests" ${CUDA_TESTS_TIMEOUT:-240} \
  $PY -m pytest tests/test_functorch.py tests/test_cuda_graphs.py tests/test_cuda.py \
  tests/test_nn_cuda.py -q -rfEs \
  --maxfail=20 -p no:cacheprovider \
  > "$LOG/tests_cuda.log" 2>&1 &
cuda_tests=$!
shard_pids=()
: > "$LOG/tests_triton.log"
for ((i = 0; i < TRITON_SHARDS; i++)); do
  BLOSA_TEST_SHARD=$i/$TRITON_SHARDS timed "Triton tests $i/$TRITON_SHARDS" \
    ${TRITON_TESTS_TIMEOUT:-240} $PY -m pytest tests/triton -q -rfEs --maxfail=20 \
    --ignore=tests/triton/test_triton_compiles.py --ignore=tests/triton/test_triton_settings.py \
    --ignore=tests/triton/test_triton_bench_scripts.py -p no:cacheprovider \
    > "$LOG/tests_triton.$i.log" 2>&1 &
  shard_pids+=($!)
done
triton_status=0
for ((i = 0; i < TRITON_SHARDS; i++)); do
  wait "${shard_pids[$i]}" || triton_status=$?
  # One file for all shards: the device tool brings back eight.
  { echo "== shard $i/$TRITON_SHARDS"; cat "$LOG/tests_triton.$i.log"; } >> "$LOG/tests_triton.log"
  rm "$LOG/tests_triton.$i.log"
done
wait $cuda_tests
tests_status=$?
echo "-- CUDA tests"
tail -25 "$LOG/tests_cuda.log"
echo "-- Triton tests (each shard's summary; failures in tests_triton.log)"
grep -E "^== shard|^FAILED|^ERROR|^[0-9]+ (passed|failed|error)|KeyboardInterrupt|no tests ran" \
  "$LOG/tests_triton.log" | cut -c1-160 | tail -40

step tables
echo "== kernel rates (table; per-kernel times in rates.md)"
sed -n '/^| backend/,$p' "$LOG/rates.md"
# The targets of issues 4 and 5 from the same figures: each backend's defaults, a met target in
# bold (bench/gpu_tools/targets.py; `--take` and `--plot` there, afterwards, for variants and a chart).
if [ -f "$LOG/rates.json" ]; then
  echo "== targets"
  $PY bench/gpu_tools/targets.py "$LOG/rates.json"
fi

if [ -f "$LOG/table2.md" ]; then
  echo "== Table 2"
  grep "^|" "$LOG/table2.md"
fi

echo "cuda tests exit $tests_status, triton tests exit $triton_status, rates exit $rates_status" \
  "after ${SECONDS}s" | tee -a "$LOG/device.txt"
exit $(( tests_status || triton_status || rates_status ))
