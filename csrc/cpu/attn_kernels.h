// Fused CPU loops of masked_block_attn. They live in their own source file because setup.py
// compiles that file alone with -ffast-math (the only way GCC vectorizes tanh/exp), so nothing
// in it may test for NaN or Inf: empty rows are decided from the mask, never from values.
#pragma once

#include <cstdint>

#include "../blosa_math.h"

namespace blosa::cpu {

// Sizes and settings of one call. All tensors are contiguous [B, n, d] (bias [d], mask [B, n]).
struct AttnShape {
  int64_t B, n, d;
  int64_t block_len;  // already resolved: 1 <= block_len <= n
  Direction direction;
  double scale;
};

// Writes out[b, j, :] and lse[b, j, :] (lse may be null: not written) for every query with at
// least one allowed key. The caller fills out with 0 and lse with +inf beforehand; other rows
// are left untouched.
template <typename T>
void forward(const AttnShape& s, const T* dep, const T* head, const T* value, const T* bias,
             const bool* mask, T* out, T* lse);

// Accumulates gradients into d_dep, d_head, d_value, which the caller zero-fills. out and lse
// are the forward's; both null means it saved neither, and each query's are recomputed.
template <typename T>
void backward(const AttnShape& s, const T* grad_out, const T* dep, const T* head, const T* value,
              const T* bias, const bool* mask, const T* out, const T* lse, T* d_dep, T* d_head,
              T* d_value);

}  // namespace blosa::cpu
