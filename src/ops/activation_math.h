// The point-wise activations beyond ReLU that torchvision's mobile families use (sigmoid,
// SiLU, hardsigmoid, hardswish) and the clip of ReLU6, forward and backward, written once for
// the host and the GPU: every backend's kernel calls these functions, so the reference and
// the CUDA kernels compute the same formulas. Header-only, no dependencies.
#pragma once
#include <math.h>

#if defined(__CUDACC__)
#define TRIDENT_HOST_DEVICE __host__ __device__
#else
#define TRIDENT_HOST_DEVICE
#endif

namespace trident::ops {

enum class ActivationFn : int { sigmoid, silu, hardsigmoid, hardswish, clip };

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
  }
  return dy;
}

}  // namespace trident::ops
