// dropout (the model's op), dropout_mask (its training mask, drawn from the random state) and
// rng_advance (the state's step counter, incremented in place once per step). See ops/dropout.h.
#include "ops/dropout.h"

#include <cmath>

#include "ops/op_helpers.h"

namespace trident::ops {

DropoutParams dropout_params(const ir::Attrs& a) {
  DropoutParams p;
  p.p = a.f("p");
  if (!(p.p >= 0 && p.p < 1)) throw Error("attribute 'p' must be a probability from 0 to 1 (exclusive), not " + std::to_string(p.p));
  const int64_t salt = a.i("salt", 0);
  if (salt < 0 || salt > 0xFFFFFFFFll) throw Error("attribute 'salt' must fit 32 bits");
  p.salt = static_cast<uint32_t>(salt);
  const int64_t group = a.i("group", 1);
  if (group < 1) throw Error("attribute 'group' must be at least 1");
  p.group = static_cast<uint64_t>(group);
  if (a.i("per_sample", 0) != 0 && a.i("per_sample", 0) != 1) throw Error("attribute 'per_sample' must be 0 or 1");
  p.threshold = static_cast<uint32_t>(std::llround(p.p * double(1u << kDropoutBits)));
  p.scale = 1.0 / (1.0 - p.p);
  return p;
}

namespace {

void expect_rng_state(const ir::Value& rng) {
  if (rng.dtype != DType::i32 || rng.shape != Shape{2})
    throw Error("the random state must be i32[2] (a key and a step counter), not " +
                std::string(dtype_name(rng.dtype)) + shape_str(rng.shape));
}

}  // namespace

void register_dropout_ops() {
  ir::OpDef drop = op_def("dropout", {"x"}, {"y"},
                          "training: zeroes each element (per_sample: each sample) with probability p and scales "
                          "the rest by 1/(1-p); inference: the identity (rewritten by seed_dropout / remove_dropout, "
                          "never run)");
  drop.infer = [](const Node& n, const Graph& g) {
    expect_float(in_value(g, n, 0), "input");
    dropout_params(n.attrs);
    const Shape& s = in_value(g, n, 0).shape;
    if (n.attrs.i("per_sample", 0) && s.size() != 4 && s.size() != 2)
      throw Error("a per-sample dropout needs an [N,H,W,C] or [N,F] input, not " + shape_str(s));
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, in_value(g, n, 0).dtype}};
  };
  ir::OpRegistry::add(drop);

  ir::OpDef mask = op_def("dropout_mask", {"rng"}, {"mask"},
                          "dropout's mask of attribute shape and dtype: 0, or 1/(1-p) where the element is kept, "
                          "drawn from the random state (key, step) and the salt, one draw per `group` elements");
  mask.infer = [](const Node& n, const Graph& g) {
    expect_rng_state(in_value(g, n, 0));
    const DropoutParams p = dropout_params(n.attrs);
    const Shape& shape = n.attrs.ints("shape");
    if (shape.empty()) throw Error("attribute 'shape' must have at least one axis");
    for (int64_t d : shape)
      if (d <= 0) throw Error("attribute 'shape' " + shape_str(shape) + " has an extent below 1");
    if (numel(shape) % static_cast<int64_t>(p.group) != 0)
      throw Error("attribute 'group' " + std::to_string(p.group) + " does not divide the mask's " +
                  std::to_string(numel(shape)) + " elements");
    const DType t = parse_dtype(n.attrs.s("dtype"));
    if (!is_floating(t)) throw Error("attribute 'dtype' must be a floating type");
    return std::vector<TypeInfo>{{shape, t}};
  };
  ir::OpRegistry::add(mask);

  // Its other inputs are the masks drawn from the state, so it runs after every one of them.
  ir::OpDef advance = op_def("rng_advance", {"rng", "after..."}, {"rng_next"},
                             "adds one to the random state's step counter, in place, after the masks drawn from it");
  advance.variadic = true;
  advance.infer = [](const Node& n, const Graph& g) {
    expect_rng_state(in_value(g, n, 0));
    return std::vector<TypeInfo>{{in_value(g, n, 0).shape, DType::i32}};
  };
  advance.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{{0, 0}}; };
  advance.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(advance);
}

}  // namespace trident::ops
