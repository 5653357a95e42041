// Small helpers shared by the op definitions: attribute pairs with defaults, rank checks,
// and the convolution/pooling output-extent formula, so each op file stays declarative.
#pragma once
#include <string>
#include <vector>

#include "core/checked_math.h"
#include "core/error.h"
#include "ir/op_registry.h"

namespace trident::ops {

using ir::Attrs;
using ir::Graph;
using ir::Node;
using ir::TypeInfo;

// An [h, w] attribute; `fallback` when absent. Rejects wrong lengths and values below `min`.
std::vector<int64_t> pair_attr(const Attrs& a, const std::string& key, int64_t fallback, int64_t min);

const ir::Value& in_value(const Graph& g, const Node& n, size_t i);
void expect_rank(const ir::Value& v, size_t rank, const std::string& what);
void expect_float(const ir::Value& v, const std::string& what);
void expect_same_shape(const ir::Value& a, const ir::Value& b, const std::string& what);

// Output extent of a sliding window; throws if the window does not fit.
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                   const std::string& axis);

// An affine [2, C] f32 (row 0 scale, row 1 shift per channel: ops/bn_apply.cpp); `what`
// names it in the message.
void expect_affine(const ir::Value& affine, int64_t channels, const std::string& what);

// Copies the attributes named in `keys` (when present) from `from` into a new Attrs.
Attrs copy_attrs(const Attrs& from, std::initializer_list<const char*> keys);

}  // namespace trident::ops
