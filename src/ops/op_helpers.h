// Small helpers shared by the op definitions: the schema constructor, rank and dtype checks,
// so each op file stays declarative. Window geometry lives in ops/window.h.
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

// An op's schema: name, input and output names (ir/op_registry.h), one-line summary. The op file
// then sets the rules (infer, backward, …) and traits it needs.
ir::OpDef op_def(std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
                 std::string summary);

const ir::Value& in_value(const Graph& g, const Node& n, size_t i);
void expect_rank(const ir::Value& v, size_t rank, const std::string& what);
void expect_float(const ir::Value& v, const std::string& what);
void expect_same_shape(const ir::Value& a, const ir::Value& b, const std::string& what);

// An affine [2, C] f32 (row 0 scale, row 1 shift per channel: ops/bn_apply.cpp); `what`
// names it in the message.
void expect_affine(const ir::Value& affine, int64_t channels, const std::string& what);

// Copies the attributes named in `keys` (when present) from `from` into a new Attrs.
Attrs copy_attrs(const Attrs& from, std::initializer_list<const char*> keys);

}  // namespace trident::ops
