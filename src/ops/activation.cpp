// activation: the point-wise functions of ops/activation_math.h as one op with attribute fn
// (sigmoid, silu, hardsigmoid, hardswish), so importers, passes and backends meet one op and
// one parameter struct instead of an op per function; activation_backward is its gradient
// (and clip's, with fn = clip), computed from the forward input.
#include <cmath>
#include <limits>

#include "ops/activation.h"
#include "ops/op_helpers.h"

namespace trident::ops {

namespace {

struct FnName {
  ActivationFn fn;
  const char* name;
};
constexpr FnName kFns[] = {{ActivationFn::sigmoid, "sigmoid"},
                           {ActivationFn::silu, "silu"},
                           {ActivationFn::hardsigmoid, "hardsigmoid"},
                           {ActivationFn::hardswish, "hardswish"},
                           {ActivationFn::clip, "clip"}, {ActivationFn::gelu, "gelu"},
                           {ActivationFn::gelu_tanh, "gelu_tanh"}};

std::vector<TypeInfo> same_as_input(const Node& n, const Graph& g) {
  expect_float(in_value(g, n, 0), "input");
  activation_params(n.attrs);
  return {{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
}

}  // namespace

const char* activation_fn_name(ActivationFn fn) {
  for (const FnName& f : kFns)
    if (f.fn == fn) return f.name;
  return "?";
}

ActivationParams activation_params(const ir::Attrs& a) {
  ActivationParams p;
  const std::string fn = a.s("fn");
  bool known = false;
  for (const FnName& f : kFns)
    if (fn == f.name) p.fn = f.fn, known = true;
  if (!known) throw Error("unknown activation '" + fn + "' (sigmoid, silu, hardsigmoid, hardswish, gelu, gelu_tanh, clip)");
  p.alpha = static_cast<float>(a.f("alpha", 1.0 / 6.0));
  p.beta = static_cast<float>(a.f("beta", 0.5));
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta)) throw Error("attributes 'alpha' and 'beta' must be finite");
  p.lo = static_cast<float>(a.f("min", -std::numeric_limits<double>::infinity()));
  p.hi = static_cast<float>(a.f("max", std::numeric_limits<double>::infinity()));
  if (!(p.lo <= p.hi)) throw Error("attribute 'min' must not exceed 'max'");
  return p;
}

void register_activation_ops() {
  ir::OpDef act = op_def("activation", {"x"}, {"y"},
                         "a point-wise function: fn = sigmoid, silu, hardsigmoid (alpha, beta), hardswish, gelu or "
                         "gelu_tanh");
  act.infer = [](const Node& n, const Graph& g) {
    if (activation_params(n.attrs).fn == ActivationFn::clip) throw Error("clip is its own op; use op clip");
    return same_as_input(n, g);
  };
  act.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    return std::vector<int>{
        g.add_node1("activation_backward", {n.inputs[0], dys[0]}, n.attrs, n.name + ".backward")};
  };
  ir::OpRegistry::add(act);

  ir::OpDef bwd = op_def("activation_backward", {"x", "dy"}, {"dx"},
                         "the gradient of activation (or clip, fn = clip) from its input x");
  bwd.infer = [](const Node& n, const Graph& g) {
    expect_same_shape(in_value(g, n, 0), in_value(g, n, 1), "the input and its gradient");
    return same_as_input(n, g);
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
