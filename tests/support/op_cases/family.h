// Shared by the files of the op case table (support/op_cases/*.cpp, one per op family): each family
// appends its entries; these helpers name them and infer the shapes a builder needs.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/op_case.h"

namespace trident::test_support::op_family {

void add_conv_cases(std::vector<OpCase>& cases);
void add_batchnorm_cases(std::vector<OpCase>& cases);
void add_pool_cases(std::vector<OpCase>& cases);
void add_elementwise_cases(std::vector<OpCase>& cases);
void add_linear_loss_sgd_cases(std::vector<OpCase>& cases);
void add_cast_cases(std::vector<OpCase>& cases);
void add_activation_cases(std::vector<OpCase>& cases);
void add_pad_slice_cases(std::vector<OpCase>& cases);
void add_cbr_weight_backward_cases(std::vector<OpCase>& cases);
void add_dropout_cases(std::vector<OpCase>& cases);
void add_quantize_cases(std::vector<OpCase>& cases);

// "2x5x7x3": a shape as part of a case name.
std::string tag(const Shape& s);

// The shape of output `index` of `op` over inputs of `inputs` (f32), inferred without keeping the
// node.
Shape inferred_shape(const std::string& op, const std::vector<Shape>& inputs, const ir::Attrs& attrs, int index = 0);

const std::vector<DType> kF32F16{DType::f32, DType::f16};
const std::vector<DType> kAllFloat{DType::f32, DType::f16, DType::bf16};

// Relative to the tensor's scale (Measure::Scaled), one draw from `seed`, in `dtypes`; `outputs`
// empty: every value a node writes.
OpCase scaled_case(std::string name, std::function<ir::Graph(DType)> build, uint64_t seed, std::vector<DType> dtypes,
                   std::vector<std::string> outputs = {});

// Per element on the f32 row, two draws (seeds 11 and 12: the second rebinds every pointer).
OpCase per_element_case(std::string name, std::function<ir::Graph(DType)> build, Fill fill = Fill::Uniform);

// The case `build` in f32 against its one node's decomposition on cpu_ref
// (Reference::Decomposition), per element, from one draw of reals: fused kernels are checked
// against what they fuse.
OpCase decomposition_case(std::string name, std::function<ir::Graph(DType)> build);

// A preparation that makes the named values positive (|v| + 0.5).
std::function<void(GraphRunner&, const ir::Graph&)> make_positive(std::vector<std::string> names);

}  // namespace trident::test_support::op_family
