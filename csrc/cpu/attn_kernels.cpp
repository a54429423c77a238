// Fused CPU loops of masked_block_attn; see attn_kernels.h. Compiled with -ffast-math -fopenmp.
//
// Work is split into tasks of (batch, block, feature tile). A task owns its block's rows of
// every output for its features, so forward and backward both run without atomics or locks,
// and the result does not depend on the number of threads. The innermost loop runs over the
// features of a tile (contiguous in memory) and vectorizes, tanh and exp included.
#include "attn_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>

namespace blosa::cpu {
namespace {

constexpr int64_t kTile = 64;  // features per task: a few SIMD registers' worth

// Index arithmetic of one task.
struct Task {
  int64_t b, start, end, k0, width;
};

Task task_at(const AttnShape& s, int64_t index) {
  const int64_t tiles = (s.d + kTile - 1) / kTile;
  const int64_t blocks = (s.n + s.block_len - 1) / s.block_len;
  const int64_t tile = index % tiles;
  const int64_t block = (index / tiles) % blocks;
  const int64_t b = index / (tiles * blocks);
  const int64_t start = block * s.block_len;
  const int64_t k0 = tile * kTile;
  return {b, start, std::min(start + s.block_len, s.n), k0, std::min(kTile, s.d - k0)};
}

int64_t task_count(const AttnShape& s) {
  return s.B * ((s.n + s.block_len - 1) / s.block_len) * ((s.d + kTile - 1) / kTile);
}

inline bool is_real(const bool* mask, int64_t row) { return mask == nullptr || mask[row]; }

// The softmax of query j over its allowed keys, for the task's features: writes out_j[k] and
// lse_j[k] (lse_j may be null) and returns the number of keys; with no key it writes nothing. kFixedPivot: scores are shifted by the constant c (one exp per element);
// otherwise by a running maximum per feature (large scales only).
template <typename T, bool kFixedPivot>
int64_t query_softmax(const AttnShape& s, const Task& t, int64_t j, const T* dep,
                      const T* head, const T* value, const T* bias, const bool* mask, T* out_j,
                      T* lse_j) {
  const T c = static_cast<T>(s.scale), inv_c = T(1) / c;
  const int64_t w = t.width;
  const int64_t row_j = t.b * s.n + j;
  const T* head_j = head + row_j * s.d + t.k0;
  T query[kTile], sum[kTile], acc[kTile], pivot[kTile];
  for (int64_t k = 0; k < w; ++k) {
    query[k] = head_j[k] + (bias ? bias[t.k0 + k] : T(0));
    sum[k] = T(0);
    acc[k] = T(0);
    pivot[k] = kFixedPivot ? c : -c;  // -c bounds every score from below
  }
  int64_t lo, hi, keys = 0;
  key_range(s.direction, j, t.start, t.end, &lo, &hi);
  for (int64_t i = lo; i < hi; ++i) {
    const int64_t row_i = t.b * s.n + i;
    if ((skips_self(s.direction) && i == j) || !is_real(mask, row_i)) continue;
    ++keys;
    const T* dep_i = dep + row_i * s.d + t.k0;
    const T* value_i = value + row_i * s.d + t.k0;
    if constexpr (kFixedPivot) {
#pragma omp simd
      for (int64_t k = 0; k < w; ++k) {
        const T p = shifted_exp(scaled_tanh(dep_i[k] + query[k], inv_c), c, c);
        softmax_accumulate(p, value_i[k], sum[k], acc[k]);
      }
    } else {
#pragma omp simd
      for (int64_t k = 0; k < w; ++k) {
        const T score = c * scaled_tanh(dep_i[k] + query[k], inv_c);
        online_softmax_update(score, value_i[k], pivot[k], sum[k], acc[k]);
      }
    }
  }
  if (keys == 0) return 0;
#pragma omp simd
  for (int64_t k = 0; k < w; ++k) out_j[k] = acc[k] / sum[k];
  if (lse_j != nullptr) {
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) lse_j[k] = log_sum_exp(pivot[k], sum[k]);
  }
  return keys;
}

// Forward of one task: query_softmax of each real query, into out and lse.
template <typename T, bool kFixedPivot>
void forward_task(const AttnShape& s, const Task& t, const T* dep, const T* head, const T* value,
                  const T* bias, const bool* mask, T* out, T* lse) {
  for (int64_t j = t.start; j < t.end; ++j) {
    const int64_t row_j = t.b * s.n + j;
    if (!is_real(mask, row_j)) continue;
    const int64_t off_j = row_j * s.d + t.k0;
    query_softmax<T, kFixedPivot>(s, t, j, dep, head, value, bias, mask, out + off_j,
                                  lse == nullptr ? nullptr : lse + off_j);
  }
}

// Backward of one task. With lse null (the forward saved neither out nor lse), each query's
// out and lse are recomputed first by query_softmax, pivoted as kFixedPivot says.
template <typename T, bool kFixedPivot>
void backward_task(const AttnShape& s, const Task& t, const T* grad_out, const T* dep,
                   const T* head, const T* value, const T* bias, const bool* mask, const T* out,
                   const T* lse, T* d_dep, T* d_head, T* d_value) {
  const T c = static_cast<T>(s.scale), inv_c = T(1) / c;
  const int64_t w = t.width;
  T query[kTile], h_a[kTile], h_s[kTile], h_r[kTile];  // sums of head_grad_accumulate
  T out_recomputed[kTile], lse_recomputed[kTile];
  for (int64_t j = t.start; j < t.end; ++j) {
    const int64_t row_j = t.b * s.n + j;
    if (!is_real(mask, row_j)) continue;
    const int64_t off_j = row_j * s.d + t.k0;
    const T* g_j = grad_out + off_j;
    const T* out_j = out_recomputed;
    const T* lse_j = lse_recomputed;
    if (lse != nullptr) {
      out_j = out + off_j;
      lse_j = lse + off_j;
    } else if (query_softmax<T, kFixedPivot>(s, t, j, dep, head, value, bias, mask,
                                             out_recomputed, lse_recomputed) == 0) {
      continue;  // no key: d_head = 0, which the caller's zero-fill already holds
    }
    for (int64_t k = 0; k < w; ++k) {
      query[k] = head[off_j + k] + (bias ? bias[t.k0 + k] : T(0));
      h_a[k] = h_s[k] = h_r[k] = T(0);
    }
    int64_t lo, hi;
    key_range(s.direction, j, t.start, t.end, &lo, &hi);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t row_i = t.b * s.n + i;
      if ((skips_self(s.direction) && i == j) || !is_real(mask, row_i)) continue;
      const int64_t off_i = row_i * s.d + t.k0;
      const T* dep_i = dep + off_i;
      const T* value_i = value + off_i;
      T* d_dep_i = d_dep + off_i;
      T* d_value_i = d_value + off_i;
#pragma omp simd
      for (int64_t k = 0; k < w; ++k) {
        const T th = scaled_tanh(dep_i[k] + query[k], inv_c);
        const T p = shifted_exp(th, c, lse_j[k]);
        // d_head in the form the CUDA kernels use (blosa_math.h), so these tests run it too.
        head_grad_accumulate(p, value_i[k], out_j[k], th, h_a[k], h_s[k], h_r[k]);
        d_dep_i[k] += grad_z(p, g_j[k], value_i[k], out_j[k], th);
        d_value_i[k] += p * g_j[k];
      }
    }
    for (int64_t k = 0; k < w; ++k) d_head[off_j + k] = head_grad(g_j[k], h_a[k], h_s[k], h_r[k]);
  }
}

}  // namespace

template <typename T>
void forward(const AttnShape& s, const T* dep, const T* head, const T* value, const T* bias,
             const bool* mask, T* out, T* lse) {
  const bool fixed_pivot = use_fixed_pivot<T>(s.scale);
  at::parallel_for(0, task_count(s), 1, [&](int64_t first, int64_t last) {
    for (int64_t index = first; index < last; ++index) {
      const Task t = task_at(s, index);
      if (fixed_pivot) {
        forward_task<T, true>(s, t, dep, head, value, bias, mask, out, lse);
      } else {
        forward_task<T, false>(s, t, dep, head, value, bias, mask, out, lse);
      }
    }
  });
}

template <typename T>
void backward(const AttnShape& s, const T* grad_out, const T* dep, const T* head, const T* value,
              const T* bias, const bool* mask, const T* out, const T* lse, T* d_dep, T* d_head,
              T* d_value) {
  const bool fixed_pivot = use_fixed_pivot<T>(s.scale);
  at::parallel_for(0, task_count(s), 1, [&](int64_t first, int64_t last) {
    for (int64_t index = first; index < last; ++index) {
      const Task t = task_at(s, index);
      if (fixed_pivot) {
        backward_task<T, true>(s, t, grad_out, dep, head, value, bias, mask, out, lse, d_dep,
                               d_head, d_value);
      } else {
        backward_task<T, false>(s, t, grad_out, dep, head, value, bias, mask, out, lse, d_dep,
                                d_head, d_value);
      }
    }
  });
}

template void forward<float>(const AttnShape&, const float*, const float*, const float*,
                             const float*, const bool*, float*, float*);
template void forward<double>(const AttnShape&, const double*, const double*, const double*,
                              const double*, const bool*, double*, double*);
template void backward<float>(const AttnShape&, const float*, const float*, const float*,
                              const float*, const float*, const bool*, const float*,
                              const float*, float*, float*, float*);
template void backward<double>(const AttnShape&, const double*, const double*, const double*,
                               const double*, const double*, const bool*, const double*,
                               const double*, double*, double*, double*);

}  // namespace blosa::cpu
