// The point-wise activations beyond ReLU that torchvision's families use (sigmoid, SiLU,
// hardsigmoid, hardswish; GELU, exact and tanh-approximated, for ConvNeXt) and the clip of
// ReLU6, forward and backward, written once for
// the host and the GPU: every backend's kernel calls these functions, so the reference and
// the CUDA kernels compute the same formulas. Header-only, no dependencies.
#pragma once
#include <math.h>

#include "core/host_device.h"

namespace trident::ops {

enum class ActivationFn : int { sigmoid, silu, hardsigmoid, hardswish, clip, gelu, gelu_tanh };

// hardsigmoid(x) = clamp(alpha·x + beta, 0, 1) (ONNX's defaults 0.2, 0.5; PyTorch's 1/6, 0.5);
// hardswish(x) = x·hardsigmoid(x) with alpha 1/6; clip bounds lo, hi (backward only: the
// forward is the clip op).
struct ActivationParams {
  ActivationFn fn = ActivationFn::sigmoid;
  float alpha = 1.f / 6.f, beta = 0.5f;
  float lo = 0.f, hi = 0.f;
};

TRIDENT_HOST_DEVICE inline float activation_exp(float x) { return expf(x); }
TRIDENT_HOST_DEVICE inline double activation_exp(double x) { return exp(x); }
TRIDENT_HOST_DEVICE inline float activation_erf(float x) { return erff(x); }
TRIDENT_HOST_DEVICE inline double activation_erf(double x) { return erf(x); }
TRIDENT_HOST_DEVICE inline float activation_tanh(float x) { return tanhf(x); }
TRIDENT_HOST_DEVICE inline double activation_tanh(double x) { return tanh(x); }

// GELU as PyTorch computes it: exact, x·Φ(x) with Φ(x) = (1 + erf(x/√2))/2, or with
// approximate='tanh', x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
inline constexpr double kSqrtHalf = 0.70710678118654752440, kSqrtTwoOverPi = 0.79788456080286535588,
                        kInvSqrtTwoPi = 0.39894228040143267794, kGeluCubic = 0.044715;

template <class T>
TRIDENT_HOST_DEVICE inline T logistic(T x) {
  return T(1) / (T(1) + activation_exp(-x));
}

template <class T>
TRIDENT_HOST_DEVICE inline T activation_forward(const ActivationParams& p, T x) {
  switch (p.fn) {
    case ActivationFn::sigmoid: return logistic(x);
    case ActivationFn::silu: return x * logistic(x);
    case ActivationFn::hardsigmoid: {
      const T h = T(p.alpha) * x + T(p.beta);
      return h < T(0) ? T(0) : h > T(1) ? T(1) : h;
    }
    case ActivationFn::hardswish: {
      const T h = x / T(6) + T(0.5);
      return x * (h < T(0) ? T(0) : h > T(1) ? T(1) : h);
    }
    case ActivationFn::clip: return x < T(p.lo) ? T(p.lo) : x > T(p.hi) ? T(p.hi) : x;
    case ActivationFn::gelu: return x * T(0.5) * (T(1) + activation_erf(x * T(kSqrtHalf)));
    case ActivationFn::gelu_tanh:
      return T(0.5) * x * (T(1) + activation_tanh(T(kSqrtTwoOverPi) * (x + T(kGeluCubic) * x * x * x)));
  }
  return x;
}

// dx for the upstream gradient dy at input x.
template <class T>
TRIDENT_HOST_DEVICE inline T activation_backward(const ActivationParams& p, T x, T dy) {
  switch (p.fn) {
    case ActivationFn::sigmoid: {
      const T s = logistic(x);
      return dy * s * (T(1) - s);
    }
    case ActivationFn::silu: {
      const T s = logistic(x);
      return dy * s * (T(1) + x * (T(1) - s));
    }
    case ActivationFn::hardsigmoid: {
      const T h = T(p.alpha) * x + T(p.beta);
      return h > T(0) && h < T(1) ? dy * T(p.alpha) : T(0);
    }
    case ActivationFn::hardswish:  // PyTorch's: 0 below −3, dy above 3, dy·(x/3 + 1/2) between
      return x < T(-3) ? T(0) : x > T(3) ? dy : dy * (x / T(3) + T(0.5));
    case ActivationFn::clip: return x > T(p.lo) && x < T(p.hi) ? dy : T(0);
    case ActivationFn::gelu: {  // Φ(x) + x·φ(x)
      const T cdf = T(0.5) * (T(1) + activation_erf(x * T(kSqrtHalf)));
      const T pdf = activation_exp(T(-0.5) * x * x) * T(kInvSqrtTwoPi);
      return dy * (cdf + x * pdf);
    }
    case ActivationFn::gelu_tanh: {
      const T inner = T(kSqrtTwoOverPi) * (x + T(kGeluCubic) * x * x * x);
      const T t = activation_tanh(inner);
      const T d_inner = T(kSqrtTwoOverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * d_inner);
    }
  }
  return dy;
}

}  // namespace trident::ops
