// Parsing of the optimizer ops' attributes into their typed settings (ops/optimizer_params.h),
// with the range checks every backend then relies on.
#include "ops/optimizer_params.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace trident::ops {

namespace {

size_t tensor_count(const ir::Node& n) {
  const int64_t count = n.attrs.i("count");
  if (count < 1) throw Error("attribute 'count' must be at least 1, not " + std::to_string(count));
  return static_cast<size_t>(count);
}

}  // namespace

bool is_optimizer_op(std::string_view op) { return op == "sgd_update" || op == "adamw_update"; }

LossScaling loss_scaling_params(const ir::Node& n) {
  LossScaling s;
  s.on = n.attrs.i("loss_scaling", 0) != 0;
  s.growth_interval = n.attrs.i("growth_interval", 2000);
  if (s.on && s.growth_interval < 1) throw Error("attribute 'growth_interval' must be at least 1");
  return s;
}

SgdParams sgd_params(const ir::Node& n) {
  SgdParams p;
  p.count = tensor_count(n);
  p.momentum = n.attrs.f("momentum", 0.0);
  p.weight_decay = n.attrs.f("weight_decay", 0.0);
  p.nesterov = n.attrs.i("nesterov", 0) != 0;
  p.scaling = loss_scaling_params(n);
  return p;
}

AdamwParams adamw_params(const ir::Node& n) {
  AdamwParams p;
  p.count = tensor_count(n);
  p.beta1 = n.attrs.f("beta1", p.beta1);
  p.beta2 = n.attrs.f("beta2", p.beta2);
  p.eps = n.attrs.f("eps", p.eps);
  p.weight_decay = n.attrs.f("weight_decay", p.weight_decay);
  p.scaling = loss_scaling_params(n);
  for (const auto& [name, beta] : {std::pair{"beta1", p.beta1}, std::pair{"beta2", p.beta2}})
    if (!(beta >= 0 && beta < 1))
      throw Error(std::string("attribute '") + name + "' must lie in [0, 1), not " + std::to_string(beta));
  if (!(p.eps > 0) || !std::isfinite(p.eps)) throw Error("attribute 'eps' must be a finite number > 0");
  if (!(p.weight_decay >= 0) || !std::isfinite(p.weight_decay))
    throw Error("attribute 'weight_decay' must be a finite number >= 0");
  return p;
}

}  // namespace trident::ops
