// Every backward rule by finite differences on the reference backend: each one-node case of the op
// case table whose op has a backward rule runs in the harness's finite-difference mode
// (support/op_gradient_harness.cpp) on cpu_ref in f64.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "support/op_case.h"

namespace trident {
namespace {

using test_support::op_cases;

std::vector<size_t> differentiable_cases() {
  std::vector<size_t> out;
  for (size_t i = 0; i < op_cases().size(); ++i)
    if (test_support::op_case_gradient_skip_reason(op_cases()[i]).empty()) out.push_back(i);
  return out;
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = op_cases()[info.param].name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

class OpGradientTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpGradientTest, BackwardRuleMatchesCentralDifferences) {
  test_support::check_op_case_gradient(op_cases()[GetParam()]);
}

INSTANTIATE_TEST_SUITE_P(Table, OpGradientTest, ::testing::ValuesIn(differentiable_cases()), case_name);

}  // namespace
}  // namespace trident
