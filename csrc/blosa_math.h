// Per-element math of masked_block_attn, shared by the CPU and CUDA kernels.
//
// Everything here is an inline function usable on host and device, so the CPU tests run the
// exact formulas the GPU kernels run. Notation (see python/blosa/reference.py):
//   z   = dep[i,k] + head[j,k] + bias[k]
//   t   = tanh(z / c)                      score s = c * t, bounded in [-c, c]
//   p   = exp(s - pivot)                   unnormalized probability
//   out = sum_i p * value[i,k] / sum_i p   lse = pivot + log(sum_i p)
// Backward, with g = grad_out[j,k] and o = out[j,k], recomputes p = exp(s - lse) and uses
//   dz  = p * g * (value[i,k] - o) * (1 - t^2)
//   d_head[j] = sum_i dz,  d_dep[i] = sum_j dz,  d_value[i] = sum_j p * g,  d_bias = sum dz.
// The kernels compute d_head[j] in the equivalent form of head_grad (below), which corrects
// the saved o (rounded to float16/bfloat16) by the recomputed p.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BLOSA_HD __host__ __device__ __forceinline__
#else
#define BLOSA_HD inline
#endif

namespace blosa {

// Which keys i a query j may attend inside its block. The integer values are part of the
// C++/Python contract (see direction_from_string in csrc/op_checks.h).
enum class Direction : int { kForward = 0, kBackward = 1, kDiag = 2, kAll = 3 };

// Keys of query j form the half-open range [*lo, *hi) of its block [start, end); under kDiag
// the query itself is excluded, which the caller skips with `i == j && dir == kDiag`.
BLOSA_HD void key_range(Direction dir, int64_t j, int64_t start, int64_t end, int64_t* lo,
                        int64_t* hi) {
  switch (dir) {
    case Direction::kForward: *lo = start; *hi = j; break;
    case Direction::kBackward: *lo = j + 1; *hi = end; break;
    default: *lo = start; *hi = end; break;
  }
}

BLOSA_HD bool skips_self(Direction dir) { return dir == Direction::kDiag; }

// Scores are bounded by c, so exp(s - c) cannot overflow; it cannot underflow to a zero sum
// either while 2c stays well inside the exponent range of T. Above this scale the kernels use
// a running maximum instead of the constant pivot c (KERNEL_NOTES.md, section 1).
template <typename T> struct FixedPivotLimit;
template <> struct FixedPivotLimit<float> { static constexpr double value = 40.0; };
template <> struct FixedPivotLimit<double> { static constexpr double value = 300.0; };

template <typename T> BLOSA_HD bool use_fixed_pivot(double scale) {
  return scale <= FixedPivotLimit<T>::value;
}

// t = tanh(z / c), given inv_scale = 1 / c.
template <typename T> BLOSA_HD T scaled_tanh(T z, T inv_scale) { return std::tanh(z * inv_scale); }

// p = exp(c * t - pivot).
template <typename T> BLOSA_HD T shifted_exp(T t, T scale, T pivot) {
  return std::exp(scale * t - pivot);
}

// One key's contribution to the running softmax numerator and denominator (fixed pivot).
template <typename T> BLOSA_HD void softmax_accumulate(T p, T v, T& sum, T& acc) {
  sum += p;
  acc += p * v;
}

// Running-maximum update for scales too large for the fixed pivot. `m` starts at -c, a lower
// bound of every score, so it is always finite and no -inf - -inf can occur.
template <typename T> BLOSA_HD void online_softmax_update(T s, T v, T& m, T& sum, T& acc) {
  const T m_new = s > m ? s : m;
  const T rescale = std::exp(m - m_new);
  const T p = std::exp(s - m_new);
  sum = sum * rescale + p;
  acc = acc * rescale + p * v;
  m = m_new;
}

// lse = pivot + log(sum); only called when the query has at least one key (sum > 0).
template <typename T> BLOSA_HD T log_sum_exp(T pivot, T sum) { return pivot + std::log(sum); }

// Gradient of the pre-tanh input z for one (query, key, feature) triple.
template <typename T> BLOSA_HD T grad_z(T p, T g, T v, T o, T t) {
  return p * g * (v - o) * (T(1) - t * t);
}

// Query-side gradient that does not trust the saved output. With w = 1 - t^2,
//   d_head[j] = sum_i grad_z = g * sum_i p w (v_i - o),
// which cancels to much less than its terms, since o = sum_i p v_i makes sum_i p (v_i - o) = 0.
// For float16/bfloat16 the saved o is rounded to the input dtype, and its rounding error delta_o
// survives that cancellation as g * delta_o * sum_i p w: more than the low-precision reference's
// own error. So d_head uses o + r instead, r = sum_i p (v_i - o) being the correction that makes
// it the output of the recomputed p (up to the accumulation's rounding):
//   d_head[j] = g * sum_i p w (v_i - o - r) = g * (a - r * s),
//   a = sum_i p w (v_i - o),   s = sum_i p w,   r = sum_i p (v_i - o),
// summed in the one loop over j's keys that recomputes p (no extra tanh or exp). With exact
// arithmetic r = 0 and this is sum_i grad_z. Shifting by the saved o (rather than summing
// p w v_i, p w, p v_i and taking a - o' s) keeps the three sums small, so the error left by
// sum_i p != 1 (the recomputed p carries the float lse's rounding) scales with d_head, not with
// |v|; a query with a single key gets exactly 0, like the reference.
template <typename T> BLOSA_HD void head_grad_accumulate(T p, T v, T o, T t, T& a, T& s, T& r) {
  const T dv = v - o;
  const T pw = p * (T(1) - t * t);
  a += pw * dv;
  s += pw;
  r += p * dv;
}

// One pair's terms for both sides at once (the fused CUDA backward): the query's head_grad sums
// (a, s, r) as head_grad_accumulate, and the key's d_dep += grad_z and d_value += p * g, from
// one recomputed p and t. grad_z = (p w (v - o)) * g here, the product head_grad's a also uses.
template <typename T>
BLOSA_HD void pair_grad_accumulate(T p, T t, T v, T o, T g, T& a, T& s, T& r, T& d_dep,
                                   T& d_value) {
  const T dv = v - o;
  const T pw = p * (T(1) - t * t);
  const T pwdv = pw * dv;
  a += pwdv;
  s += pw;
  r += p * dv;
  d_dep += pwdv * g;
  d_value += p * g;
}

// One pair's terms in a backward that recomputed the query's softmax from all of its keys
// (backward_small_recompute): o is then the output of these very weights, unrounded, so
// sum_i p (v_i - o) = 0 but for float rounding and head_grad's correction r has nothing to
// correct. With e the pair's unnormalized weight and gs = g / sum_i e the query's,
//   a += e w (v - o),   d_dep += e w (v - o) gs,   d_value += e gs,
// and d_head[j] = a gs: 7 operations a pair where pair_grad_accumulate, handed p = e / sum,
// takes 10 (that kernel's time has followed its instruction count: bench/HISTORY.md).
template <typename T>
BLOSA_HD void recomputed_pair_grad_accumulate(T e, T t, T v, T o, T gs, T& a, T& d_dep,
                                              T& d_value) {
  const T ewdv = e * (T(1) - t * t) * (v - o);
  a += ewdv;
  d_dep += ewdv * gs;
  d_value += e * gs;
}

// d_head[j] from the sums of head_grad_accumulate; 0 when the query has no key (a = s = r = 0).
template <typename T> BLOSA_HD T head_grad(T g, T a, T s, T r) { return g * (a - r * s); }

// ---------------------------------------------------------------------------------------------
// Fast forms used by the CUDA kernels. They work in the log2 domain: with a = c * log2(e),
//   p = exp(s - pivot) = exp2(a * t - pivot * log2(e)),
// so one FFMA feeds the hardware's exp2 directly. On the host (and for double on the device)
// they are the exact libm functions, so host code may call them too; no existing host path
// uses them.
//
// Device approximations (float only; one MUFU operation each on sm_75 and later):
//   tanh.approx.f32     documented max relative error about 2^-11 (~5e-4) of the result. The
//                       score s = c * t then carries an absolute error <= 2^-11 * |s| <=
//                       2^-11 * min(|z|, c), which is the dominant error of the float32 path.
//   ex2.approx.ftz.f32  max relative error about 2^-22 (a few ulp); subnormal results are
//                       flushed to 0, which never matters here since p >= 2^-116 on the
//                       fixed-pivot path (c <= 40) and p is an unnormalized weight anyway.
// The error measured on a GPU is recorded in bench/HISTORY.md.
// ---------------------------------------------------------------------------------------------

constexpr double kLog2e = 1.4426950408889634074;  // log2(e)
constexpr double kLn2 = 0.6931471805599453094;    // ln(2)

BLOSA_HD float tanh_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::tanh(x);
#endif
}
BLOSA_HD double tanh_fast(double x) { return std::tanh(x); }

BLOSA_HD float exp2_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}
BLOSA_HD double exp2_fast(double x) { return std::exp2(x); }

// 1 / x without the special-function unit, for the kernels whose time that unit bounds (the
// r = 8 forward: 28 tanh, 28 exp2 and 7 reciprocals a thread, bench/HISTORY.md): an estimate
// from x's bits (the exponent negated and the mantissa roughly inverted: relative error at most
// 0.101), then kSteps Newton steps r += r (1 - x r), each squaring the error: at most 1.1e-4
// after 2 (far inside bfloat16's rounding), float's own rounding after 3. Two FMAs a step.
// For x a positive normal float; a NaN x gives NaN.
template <int kSteps> BLOSA_HD float reciprocal_newton(float x) {
  static_assert(kSteps >= 1 && kSteps <= 3);
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  bits = 0x7EF311C3u - bits;
  float r;
  memcpy(&r, &bits, sizeof r);
  for (int step = 0; step < kSteps; ++step) {
    const float e = std::fma(-x, r, 1.0f);
    r = std::fma(r, e, r);
  }
  return r;
}

// p = exp(c * t - pivot) given scale_log2 = c * log2(e) and pivot_log2 = pivot * log2(e).
template <typename T> BLOSA_HD T shifted_exp2(T t, T scale_log2, T pivot_log2) {
  return exp2_fast(scale_log2 * t - pivot_log2);
}

// online_softmax_update in the log2 domain: s2 = score * log2(e), m2 = running max * log2(e).
// m2 starts at -c * log2(e), a lower bound of every score, so it is always finite.
template <typename T> BLOSA_HD void online_softmax_update_exp2(T s2, T v, T& m2, T& sum, T& acc) {
  const T m_new = s2 > m2 ? s2 : m2;
  const T rescale = exp2_fast(m2 - m_new);
  const T p = exp2_fast(s2 - m_new);
  sum = sum * rescale + p;
  acc = acc * rescale + p * v;
  m2 = m_new;
}

// Natural-log lse = ln(2) * (pivot_log2 + log2(sum)); only called when sum > 0.
template <typename T> BLOSA_HD T log_sum_exp2(T pivot_log2, T sum) {
  return static_cast<T>(kLn2) * (pivot_log2 + std::log2(sum));
}

}  // namespace blosa
