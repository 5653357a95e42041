// Where each operand of a bn_relu node sits, and its two typed switches. bn_relu keeps
// batchnorm2d's layout — x, gamma, beta, running_mean, running_var in; y, saved_mean,
// saved_invstd, running_mean_out, running_var_out out (training), y alone (inference) — plus
// the packed relu mask last where attribute relu_mask = 1. The op, the pass and every backend
// read positions and modes from here.
#pragma once
#include <cstddef>

#include "ir/graph.h"
#include "ops/norm_params.h"

namespace trident::ops {

namespace bn_relu_in {
inline constexpr size_t x = 0, gamma = 1, beta = 2, running_mean = 3, running_var = 4;
}
namespace bn_relu_out {
inline constexpr size_t y = 0, saved_mean = 1, saved_invstd = 2, running_mean = 3, running_var = 4, relu_mask = 5;
}

struct BnReluParams {
  bool training = true;   // batch statistics and the running update; else the running statistics
  bool bit_mask = false;  // training: also the packed mask of y > 0 (core/relu_mask.h)
  double eps = 1e-5, momentum = 0.1;

  static BnReluParams of(const ir::Node& n) {
    BnReluParams p;
    p.training = n.attrs.i("training", 1) != 0;
    p.bit_mask = n.attrs.i("relu_mask", 0) != 0;
    const NormParams norm = NormParams::of(n);
    p.eps = norm.eps;
    p.momentum = norm.momentum;
    return p;
  }
  size_t outputs() const { return training ? 5 + bit_mask : 1; }
};

}  // namespace trident::ops
