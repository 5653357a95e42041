// The activation op's parameters, parsed once from a node's attributes (fn, alpha, beta, and
// min/max for clip's backward) for every backend's kernel; the math is activation_math.h.
#pragma once
#include <string>

#include "ir/attrs.h"
#include "ops/activation_math.h"

namespace trident::ops {

// Throws an Error naming an unknown fn or a bad parameter.
ActivationParams activation_params(const ir::Attrs& a);
const char* activation_fn_name(ActivationFn fn);

}  // namespace trident::ops
