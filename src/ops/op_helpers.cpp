// Shared validation for op definitions; each throws one sentence the graph builder prefixes
// with the node's name.
#include "ops/op_helpers.h"

namespace trident::ops {

std::vector<int64_t> pair_attr(const Attrs& a, const std::string& key, int64_t fallback,
                               int64_t min) {
  std::vector<int64_t> v = a.has(key) ? a.ints(key) : std::vector<int64_t>{fallback, fallback};
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) throw Error("attribute '" + key + "' must hold 1 or 2 integers");
  for (int64_t x : v)
    if (x < min)
      throw Error("attribute '" + key + "' must be at least " + std::to_string(min) + ", got " +
                  std::to_string(x));
  return v;
}

const ir::Value& in_value(const Graph& g, const Node& n, size_t i) {
  return g.value(n.inputs.at(i));
}

void expect_rank(const ir::Value& v, size_t rank, const std::string& what) {
  if (v.shape.size() != rank)
    throw Error(what + " must have rank " + std::to_string(rank) + ", got " + shape_str(v.shape) +
                " from '" + v.name + "'");
}

void expect_float(const ir::Value& v, const std::string& what) {
  if (!is_floating(v.dtype))
    throw Error(what + " must be floating point, got " + std::string(dtype_name(v.dtype)));
}

void expect_same_shape(const ir::Value& a, const ir::Value& b, const std::string& what) {
  if (a.shape != b.shape || a.dtype != b.dtype)
    throw Error(what + ": shapes differ, " + shape_str(a.shape) + " ('" + a.name + "') vs " +
                shape_str(b.shape) + " ('" + b.name + "')");
}

int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                   const std::string& axis) {
  const std::string what = "the " + axis + " window";  // attributes may be huge; nothing wraps
  const int64_t span = checked_add(checked_mul(dilation, kernel - 1, what), 1, what);
  const int64_t padded = checked_add(in, checked_mul(2, pad, what), what);
  if (padded < span)
    throw Error("the " + axis + " window of " + std::to_string(span) +
                " does not fit an input of " + std::to_string(in) + " with padding " +
                std::to_string(pad));
  return (padded - span) / stride + 1;
}

Attrs copy_attrs(const Attrs& from, std::initializer_list<const char*> keys) {
  Attrs out;
  for (const char* k : keys)
    if (from.has(k)) out.set(k, from.items().at(k));
  return out;
}

}  // namespace trident::ops
