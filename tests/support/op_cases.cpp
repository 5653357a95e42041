// The table of cross-backend op cases: every family file of support/op_cases/ appends its entries
// once, in a fixed order, and the names are checked to be unique (they name tests).
//
// Adding an op's cross-backend tests is one entry in its family's file (a new family: a new
// file with its add_*_cases, declared in family.h and called below): a unique name, a builder
// from an activation dtype to a small graph, the dtypes, and what differs from OpCase's
// defaults (measure, row, fill, prepare, seeds; support/op_case.h). The harness
// (backends/op_cases_test.cpp) then runs it on cpu, and, in gpu_tests, on cuda, against cpu_ref.
#include <set>
#include <stdexcept>

#include "ir/op_registry.h"
#include "support/op_cases/family.h"

namespace trident::test_support {

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    op_family::add_conv_cases(all);
    op_family::add_batchnorm_cases(all);
    op_family::add_pool_cases(all);
    op_family::add_elementwise_cases(all);
    op_family::add_linear_loss_sgd_cases(all);
    op_family::add_cast_cases(all);
    op_family::add_activation_cases(all);
    op_family::add_pad_slice_cases(all);
    op_family::add_cbr_weight_backward_cases(all);
    op_family::add_dropout_cases(all);
    op_family::add_quantize_cases(all);
    std::set<std::string> seen;
    for (const OpCase& c : all)
      if (!seen.insert(c.name).second) throw std::logic_error("two op cases are named " + c.name);
    return all;
  }();
  return cases;
}

const OpCase& op_case(const std::string& name) {
  for (const OpCase& c : op_cases())
    if (c.name == name) return c;
  throw std::logic_error("no op case is named " + name);
}

namespace op_family {

std::string tag(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

Shape inferred_shape(const std::string& op, const std::vector<Shape>& inputs, const ir::Attrs& attrs, int index) {
  ir::Graph g;
  ir::Node probe;
  probe.op = op;
  for (size_t i = 0; i < inputs.size(); ++i) probe.inputs.push_back(g.add_input("in" + std::to_string(i), inputs[i]));
  probe.attrs = attrs;
  return ir::OpRegistry::get(op).infer(probe, g).at(static_cast<size_t>(index)).shape;
}

OpCase scaled_case(std::string name, std::function<ir::Graph(DType)> build, uint64_t seed, std::vector<DType> dtypes,
                   std::vector<std::string> outputs) {
  OpCase c;
  c.name = std::move(name);
  c.build = std::move(build);
  c.dtypes = std::move(dtypes);
  c.seeds = {seed};
  c.outputs = std::move(outputs);
  return c;
}

OpCase per_element_case(std::string name, std::function<ir::Graph(DType)> build, Fill fill) {
  OpCase c;
  c.name = std::move(name);
  c.build = std::move(build);
  c.measure = Measure::PerElement;
  c.fill = fill;
  c.seeds = {11, 12};
  return c;
}

OpCase decomposition_case(std::string name, std::function<ir::Graph(DType)> build) {
  OpCase c;
  c.name = std::move(name) + "_vs_decomposition";
  c.build = std::move(build);
  c.measure = Measure::PerElement;
  c.reference = Reference::Decomposition;
  c.seeds = {7};
  return c;
}

std::function<void(GraphRunner&, const ir::Graph&)> make_positive(std::vector<std::string> names) {
  return [names](GraphRunner& r, const ir::Graph& g) { map_values(r, g, names, positive); };
}

}  // namespace op_family
}  // namespace trident::test_support
