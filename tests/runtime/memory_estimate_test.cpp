// The memory estimate of a plan, and Executable::compile refusing a plan that does not fit its
// budget before allocating it (a batch that would have been killed by the kernel's OOM killer).
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/memory_estimate.h"

using namespace trident;

namespace {
passes::CompileOptions options(passes::Mode mode, MemoryBudget* budget) {
  passes::CompileOptions o;
  o.mode = mode;
  o.backend = "cpu_ref";
  o.memory_budget = budget;
  return o;
}
}  // namespace

TEST(MemoryEstimate, CountsEveryBufferOfThePlan) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {64});
  const runtime::CompiledGraph c = runtime::compile_graph(model, options(passes::Mode::Train, nullptr));
  const runtime::MemoryEstimate host = runtime::estimate_memory(c.plan, false);
  uint64_t total = 0;
  for (size_t b : c.plan.buffer_bytes) total += b;
  EXPECT_GE(host.backend_bytes, total);
  EXPECT_LT(host.backend_bytes, total + 6 * plan::kAlignment + 1);
  EXPECT_EQ(host.host_bytes, host.backend_bytes);
  EXPECT_NE(host.breakdown.find("arena"), std::string::npos);
  // On a device the host keeps copies of inputs, parameters and state only.
  const runtime::MemoryEstimate dev = runtime::estimate_memory(c.plan, true);
  EXPECT_EQ(dev.host_bytes, c.plan.bytes(plan::Buffer::Inputs) + c.plan.bytes(plan::Buffer::Params) +
                                c.plan.bytes(plan::Buffer::State));
}

TEST(MemoryEstimate, CompileClaimsThePlanAndRefusesOneThatDoesNotFit) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {256});
  MemoryBudget roomy(uint64_t{1} << 30, "test", "lower --batch");
  auto exe = runtime::Executable::compile(model, options(passes::Mode::Infer, &roomy));
  EXPECT_GE(roomy.claimed(), exe->total_bytes());

  MemoryBudget tight(uint64_t{1} << 20, "that --max-memory 1M allows", "lower --batch");
  try {
    runtime::Executable::compile(model, options(passes::Mode::Train, &tight));
    ADD_FAILURE() << "compiled beyond the budget";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the train graph's buffers (arena"), std::string::npos) << msg;
    EXPECT_NE(msg.find("more than the 1.0 MiB that --max-memory 1M allows; lower --batch"), std::string::npos) << msg;
  }
  EXPECT_EQ(tight.claimed(), 0u);
}
