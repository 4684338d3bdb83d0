// Per-coordinate arithmetic of the workers' Signum momentum and of the update rules applied from
// a decision, shared by the CPU kernels (kernels/momentum.h, kernels/update.h) and the CUDA
// kernels (kernels/cuda) so that a replica on a GPU computes the same bits as one on a CPU.
//
// Every step is a fixed sequence of IEEE float32 multiplies and adds, each rounded to nearest,
// never fused into a multiply-add: on the GPU through the _rn intrinsics (which nvcc never
// contracts), on the CPU because every Ballot target compiles with -ffp-contract=off
// (ballot_build_flags, cmake/BallotTargets.cmake). A program of its own that calls them inline
// needs the flag too where its target has FMA.
#pragma once

#include <concepts>
#include <type_traits>

#include "core/host_device.h"

namespace ballot::kernels {

BALLOT_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
BALLOT_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
BALLOT_HOST_DEVICE inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

#if !defined(__CUDACC__)
// The same operations on a vector of floats (GCC's vector extension, kernels/detail/
// update_loops.h), lane by lane, a float factor applying to every lane: the vector loops give
// the scalar bits.
template <typename V>
concept FloatVector = !std::is_arithmetic_v<V> && !std::is_pointer_v<V> && requires(V v, float f) {
  { v[0] } -> std::same_as<float&>;
  { f* v } -> std::same_as<V>;
  { v + v } -> std::same_as<V>;
};
template <FloatVector V>
inline V mul_rn(float a, V b) {
  return a * b;
}
template <FloatVector V>
inline V add_rn(V a, V b) {
  return a + b;
}
template <FloatVector V>
inline V sub_rn(V a, V b) {
  return a - b;
}
#endif

// The steps below take F = float, or on the CPU a FloatVector.

// Signum's momentum, m ← βm + (1−β)g, with keep = β and mix = 1 − β as float32.
template <typename F>
BALLOT_HOST_DEVICE inline F momentum_step(F m, F g, float keep, float mix) {
  return add_rn(mul_rn(keep, m), mul_rn(mix, g));
}

// The sign rule and plain SGD: x ← x − η(v + λx), v the ±1 vote or the fp32 direction.
template <typename F>
BALLOT_HOST_DEVICE inline F decayed_step(F x, F v, float lr, float weight_decay) {
  return sub_rn(x, mul_rn(lr, add_rn(v, mul_rn(weight_decay, x))));
}

// SGD with momentum as PyTorch defines it (learning/optimizer.h): d = g + λx;
// b ← d on the first step, else μb + (1 − τ)d; x ← x − η·(nesterov ? d + μb : b).
struct SgdFactors {
  float lr = 0.0f;
  float weight_decay = 0.0f;  // λ
  float momentum = 0.0f;      // μ
  float keep = 1.0f;          // 1 − τ (dampening τ)
  bool nesterov = false;
};
template <typename F>
BALLOT_HOST_DEVICE inline void momentum_sgd_step(F& x, F& buffer, F g, const SgdFactors& f, bool first_step) {
  const F d = add_rn(g, mul_rn(f.weight_decay, x));
  buffer = first_step ? d : add_rn(mul_rn(f.momentum, buffer), mul_rn(f.keep, d));
  x = sub_rn(x, mul_rn(f.lr, f.nesterov ? add_rn(d, mul_rn(f.momentum, buffer)) : buffer));
}

}  // namespace ballot::kernels
