// The op table proves it is complete: every registered op has a kernel on each backend of this
// binary or a sentence here saying why not, at least one entry in the op case table (or a sentence
// naming what tests it instead; an op only cpu_ref runs, inside the decompositions fused cases are
// checked against, is tested by those), and, where it has a backward rule, a case the
// finite-difference mode checks. A sentence that no longer holds fails too, so these lists only shrink as kernels and
// cases arrive. The forms a backend's traits declare (ops/backend_traits.h) must match its kernels.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/kernel.h"
#include "ir/op_registry.h"
#include "support/op_case.h"

namespace trident {
namespace {

using test_support::op_cases;

// Ops whose kernels only some backends have, and the trait by which a backend says it has them:
// where the trait is off the pass that makes the op is refused, so no kernel is needed.
const std::map<std::string, bool ops::BackendTraits::*>& trait_of_op() {
  static const std::map<std::string, bool ops::BackendTraits::*> m{
      {"bn_apply", &ops::BackendTraits::deferred_bn_apply},
      {"conv_bn_stats", &ops::BackendTraits::deferred_bn_apply},
      {"maxpool2d_index_backward", &ops::BackendTraits::maxpool_window_index},
      {"cbr_weight_backward", &ops::BackendTraits::cbr_weight_backward},
  };
  return m;
}

// (op, backend) without a kernel, and why. "*" is every backend.
const std::map<std::pair<std::string, std::string>, std::string>& no_kernel_reasons() {
  static const std::string inside_decompositions =
      "made only inside the decompositions of fused ops, which cpu_ref runs as their reference";
  static const std::string f32_only = "the CPU backends run fp32 (--precision fp16 needs --device cuda)";
  static const std::map<std::pair<std::string, std::string>, std::string> m{
      {{"dropout", "*"},
       "never reaches a backend: seed_dropout makes it dropout_mask and mul for training, remove_dropout "
       "drops it for inference"},
      {{"batchnorm_affine", "cpu"}, inside_decompositions},
      {{"batchnorm_affine", "cuda"}, inside_decompositions},
      {{"relu_mask", "cpu"}, inside_decompositions + " (cpu keeps y as its relu mask)"},
      {{"relu_mask", "cuda"}, inside_decompositions + " (the cuda kernels pack the mask themselves)"},
      {{"relu_mask_backward", "cpu"}, inside_decompositions},
      {{"relu_mask_backward", "cuda"}, inside_decompositions},
      {{"quantize_dequantize", "cuda"},
       "the cuda backend has no int8 kernels yet: int8 inference and imported QDQ models run on the CPU backends"},
      {{"cast", "cpu"}, f32_only},
      {{"cast_group", "cpu"}, f32_only},
  };
  return m;
}

// Ops without an entry in the op case table, and what tests them instead.
const std::map<std::string, std::string>& no_case_reasons() {
  static const std::map<std::string, std::string> m{
      {"allreduce_mean",
       "needs a world of ranks: tests/runtime/distributed/ and the mpi_* tests run it over one and two ranks"},
      {"allreduce_wait", "needs a world of ranks, as allreduce_mean"},
      {"dropout", "never reaches a backend (seed_dropout, remove_dropout); tests/passes/seed_dropout_test.cpp"},
  };
  return m;
}

// Ops with a backward rule that the finite-difference mode does not check, and why.
const std::map<std::string, std::string>& no_gradient_check_reasons() {
  static const std::string rounding =
      "a rounding to another dtype: central differences through it measure the rounding; its rule casts "
      "the gradient back, which the cast cases check against cpu_ref";
  static const std::map<std::string, std::string> m{{"cast", rounding}, {"cast_group", rounding}};
  return m;
}

std::string reason_without_kernel(const std::string& op, const std::string& backend) {
  if (auto t = trait_of_op().find(op); t != trait_of_op().end() && !(KernelRegistry::traits(backend).*(t->second)))
    return "the backend's traits leave this form out, so the pass that makes it is refused there";
  const auto& m = no_kernel_reasons();
  if (auto r = m.find({op, backend}); r != m.end()) return r->second;
  if (auto r = m.find({op, "*"}); r != m.end()) return r->second;
  return {};
}

// The ops the table's graphs hold, those the decompositions of its fused nodes hold (cpu_ref runs
// them as the reference), and those of cases the finite-difference mode checks.
struct Covered {
  std::set<std::string> in_cases, in_reference_decompositions, gradient_checked;
};

const Covered& covered() {
  static const Covered c = [] {
    Covered out;
    for (const test_support::OpCase& oc : op_cases()) {
      ir::Graph g = oc.build(oc.dtypes.front());
      for (int nid : g.order()) out.in_cases.insert(g.node(nid).op);
      if (test_support::op_case_gradient_skip_reason(oc).empty())
        out.gradient_checked.insert(g.node(g.order()[0]).op);
      // cpu_ref runs every fused node of the reference as its decomposition (cpu_ref/decomposed.cpp).
      for (int nid : std::vector<int>(g.order())) {
        const ir::Node fused = g.node(nid);  // a copy: decompose adds nodes to g
        const ir::OpDef& def = ir::OpRegistry::get(fused.op);
        if (!def.decompose) continue;
        ir::Graph scratch = g;
        scratch.set_order({});
        def.decompose(scratch, fused);
        for (int part : scratch.order()) out.in_reference_decompositions.insert(scratch.node(part).op);
      }
    }
    return out;
  }();
  return c;
}

// An op only cpu_ref runs, and only inside the decompositions that fused cases are checked against:
// those cases test it (a case of its own would compare cpu_ref with itself).
bool only_in_reference_decompositions(const std::string& op) {
  for (const std::string& backend : KernelRegistry::backends())
    if (backend != "cpu_ref" && KernelRegistry::has(backend, op)) return false;
  return covered().in_reference_decompositions.count(op) > 0;
}

TEST(OpTable, EveryOpHasAKernelOnEachBackendOrAReason) {
  for (const std::string& backend : KernelRegistry::backends())
    for (const std::string& op : ir::OpRegistry::names())
      if (!KernelRegistry::has(backend, op))
        EXPECT_FALSE(reason_without_kernel(op, backend).empty())
            << "backend '" << backend << "' has no kernel for '" << op << "' and no reason is stated here";
}

TEST(OpTable, EveryStatedReasonStillHolds) {
  const std::vector<std::string> backends = KernelRegistry::backends();
  for (const auto& [key, why] : no_kernel_reasons()) {
    const auto& [op, backend] = key;
    EXPECT_TRUE(ir::OpRegistry::has(op)) << "a reason is stated for '" << op << "', which is no op";
    for (const std::string& b : backends)
      if (backend == "*" || backend == b)
        EXPECT_FALSE(KernelRegistry::has(b, op)) << "'" << op << "' has a kernel on " << b << " now: drop the reason";
  }
  for (const auto& [op, why] : no_case_reasons())
    EXPECT_EQ(covered().in_cases.count(op), 0u) << "'" << op << "' has an op case now: drop the reason";
  for (const auto& [op, why] : no_gradient_check_reasons()) {
    EXPECT_TRUE(ir::OpRegistry::get(op).backward) << "'" << op << "' has no backward rule now: drop the reason";
    EXPECT_EQ(covered().gradient_checked.count(op), 0u)
        << "'" << op << "' is checked by finite differences now: drop the reason";
  }
}

TEST(OpTable, BackendTraitsMatchTheirKernels) {
  for (const std::string& backend : KernelRegistry::backends())
    for (const auto& [op, trait] : trait_of_op())
      if (KernelRegistry::traits(backend).*trait)
        EXPECT_TRUE(KernelRegistry::has(backend, op))
            << "backend '" << backend << "' declares the form of '" << op << "' in its traits but has no kernel for it";
}

TEST(OpTable, EveryOpHasAnOpCaseOrAReason) {
  for (const std::string& op : ir::OpRegistry::names())
    if (!covered().in_cases.count(op) && !only_in_reference_decompositions(op))
      EXPECT_TRUE(no_case_reasons().count(op)) << "'" << op << "' is in no entry of the op case table";
}

TEST(OpTable, EveryBackwardRuleIsCheckedByFiniteDifferences) {
  for (const std::string& op : ir::OpRegistry::names()) {
    if (!ir::OpRegistry::get(op).backward || no_case_reasons().count(op) || no_gradient_check_reasons().count(op))
      continue;
    EXPECT_TRUE(covered().gradient_checked.count(op))
        << "'" << op << "' has a backward rule but no one-node case that the finite-difference mode checks";
  }
}

}  // namespace
}  // namespace trident
