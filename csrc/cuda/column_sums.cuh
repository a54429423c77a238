// d_bias: the column sums of a [rows, d] matrix, d_head ([B · n, d]) or the small-block
// backward's per-block sums of it ([B · n/r, d], float). z = dep_i + head_j + bias, so d_bias
// is d_head summed over batch and queries.
//
// Two launches of column_sums (one where the rows fit one chunk): the first sums chunks of
// rows into a [chunks, d] float scratch, with many thread blocks to keep the loads in flight;
// the second sums the chunks and writes d_bias in the input dtype (no separate cast). Each
// thread adds its rows in order and the lanes of a column are added in a fixed tree:
// deterministic, with no atomics. ATen's `sum(0)` of the r = 8 sums took 0.011 ms of a
// 0.085 ms bfloat16 forward+backward on an H200 (B=64, n=384, d=300; bench/HISTORY.md), for
// 3.7 MB that the card reads in under 0.001 ms, then a cast kernel; the two launches take
// 0.003 + 0.002 ms. Or (KernelOptions::column_sums_one_pass), for up to kTallMaxRows rows, one
// launch of tall thread blocks: kTallCols columns by kTallLanes lanes of rows each.
#pragma once

#include <cstdint>

namespace blosa::cuda {

// Threads of a column_sums thread block: 32 columns (a warp reads 32 consecutive values of a
// row) by kColumnLanes lanes of rows.
constexpr int kColumnLanes = 8;
// Rows of a first-pass chunk: at least kColumnRows (8 a thread), and at most kMaxChunks chunks,
// so that the second pass adds at most 8 partial sums a thread.
constexpr int64_t kColumnRows = 64;
constexpr int64_t kMaxChunks = 64;
// The one-pass shape: 8 columns (a warp reads 32 bytes of each of 4 rows of float sums) by
// 128 lanes, each lane adding at most 32 rows: ceil(d / 8) thread blocks of 1024 threads (38
// at d = 300), for the r = 8 benchmark's 3072 rows 24 loads a thread in three rounds of 8.
// (All 24 at once would need more than the 64 registers a thread of 1024 gets: unrolled
// that far, ptxas issued them in turn.)
constexpr int kTallCols = 8;
constexpr int kTallLanes = 128;
constexpr int64_t kTallMaxRows = 32 * kTallLanes;

// Thread block (blockIdx.x, blockIdx.y) of kCols x kLanes threads sums the rows
// [x · chunk, (x + 1) · chunk) of columns [kCols · y, kCols · y + kCols) of x ([rows, d]) into
// out[blockIdx.x, column] ([gridDim.x, d]): lane l adds rows l, l + kLanes, ... in order, 8
// loads issued at a time, then the lanes are added in a fixed tree.
template <typename In, typename A, typename Out, int kCols = 32, int kLanes = kColumnLanes>
__global__ void __launch_bounds__(kCols * kLanes)
    column_sums(const In* __restrict__ x, int64_t rows, int64_t d, int64_t chunk,
                Out* __restrict__ out) {
  __shared__ A lanes[kLanes][kCols];
  const int64_t col = int64_t(blockIdx.y) * kCols + threadIdx.x;
  const int64_t first = int64_t(blockIdx.x) * chunk;
  const int64_t last = min(first + chunk, rows);
  A sum = A(0);
  if (col < d) {
#pragma unroll 8
    for (int64_t row = first + threadIdx.y; row < last; row += kLanes) {
      sum += static_cast<A>(x[row * d + col]);
    }
  }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  for (int half = kLanes / 2; half > 0; half /= 2) {
    if (int(threadIdx.y) < half) {
      lanes[threadIdx.y][threadIdx.x] += lanes[threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && col < d) {
    out[int64_t(blockIdx.x) * d + col] = static_cast<Out>(lanes[0][threadIdx.x]);
  }
}

}  // namespace blosa::cuda
