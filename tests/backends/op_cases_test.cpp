// The one cross-backend harness: every entry of the op case table (support/op_cases/) runs on every
// backend of this binary, in each of its dtypes the backend holds, against cpu_ref. The cpu binary
// holds the host backends; gpu_tests compiles this file again for cuda (TRIDENT_HARNESS_BACKENDS),
// so `ctest -L cpu` stays GPU-free and a GPU run covers them all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/op_case.h"

#ifndef TRIDENT_HARNESS_BACKENDS
#define TRIDENT_HARNESS_BACKENDS "cpu"
#endif

namespace trident {
namespace {

using test_support::op_cases;
using test_support::OpCase;

// The dtypes each backend's kernels hold (a graph with any other value is not run there): oneDNN's
// backend computes in f32 (i32 for labels and masks).
std::set<DType> backend_dtypes(const std::string& backend) {
  if (backend == "cpu") return {DType::f32, DType::i32};
  return {DType::f32, DType::f16, DType::bf16, DType::i32};
}

struct Instance {
  size_t index;  // into op_cases()
  std::string backend;
  DType dtype;
};

std::ostream& operator<<(std::ostream& os, const Instance& i) {
  return os << op_cases()[i.index].name << " on " << i.backend << " in " << dtype_name(i.dtype);
}

std::vector<Instance> instances() {
  std::vector<std::string> backends;
  std::stringstream list(TRIDENT_HARNESS_BACKENDS);
  for (std::string b; std::getline(list, b, ',');) backends.push_back(b);
  std::vector<Instance> out;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    const OpCase& c = op_cases()[i];
    for (const std::string& backend : backends) {
      if (!c.backends.empty() && std::find(c.backends.begin(), c.backends.end(), backend) == c.backends.end()) continue;
      const std::set<DType> held = backend_dtypes(backend);
      for (DType t : c.dtypes) {
        const ir::Graph g = c.build(t);
        bool fits = true;
        for (int v = 0; v < g.num_values(); ++v) fits = fits && held.count(g.value(v).dtype) > 0;
        if (fits) out.push_back({i, backend, t});
      }
    }
  }
  return out;
}

std::string instance_name(const ::testing::TestParamInfo<Instance>& info) {
  std::string name =
      op_cases()[info.param.index].name + "_" + info.param.backend + "_" + std::string(dtype_name(info.param.dtype));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

class OpCaseTest : public ::testing::TestWithParam<Instance> {};

TEST_P(OpCaseTest, MatchesCpuRef) {
  const Instance& p = GetParam();
  const OpCase& c = op_cases()[p.index];
  const std::string why = test_support::op_case_skip_reason(c, p.backend, p.dtype);
  if (!why.empty()) GTEST_SKIP() << why;
  test_support::check_op_case(c, p.backend, p.dtype);
}

INSTANTIATE_TEST_SUITE_P(Table, OpCaseTest, ::testing::ValuesIn(instances()), instance_name);

}  // namespace
}  // namespace trident
