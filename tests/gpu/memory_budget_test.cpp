// The memory check on the cuda backend: a plan whose device buffers exceed the GPU's free memory
// (cudaMemGetInfo) is refused by Executable::compile with one sentence naming both sizes, before
// the buffers are allocated; --max-memory bounds the host copies of a plan that fits the device.
// The oversized plan is a real batch (twice the free memory), so no seam fakes the figure; the
// free memory is read through the backend context, as the compiler reads it, so this file also
// builds without CUDA (where every test skips).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "backends/kernel.h"

#include "core/error.h"
#include "core/memory_budget.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/memory_estimate.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

passes::CompileOptions cuda_infer(MemoryBudget* budget) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  o.backend = "cuda";
  o.memory_budget = budget;
  return o;
}

// What cudaMemGetInfo reports free, through the cuda backend's context.
uint64_t free_device_bytes() {
  const std::optional<uint64_t> free = KernelRegistry::make_context("cuda")->free_device_bytes();
  EXPECT_TRUE(free.has_value()) << "the cuda context reports no free device memory";
  return free.value_or(0);
}

// The default model's device buffers at `batch`, as the compiler will estimate them.
runtime::MemoryEstimate estimate_at(int64_t batch) {
  const ir::Graph model = frontend::build_model(frontend::default_model(), {batch});
  return runtime::estimate_memory(runtime::compile_graph(model, cuda_infer(nullptr)).plan, /*on_device=*/true);
}

// The compile error, or "" when it compiled.
std::string compile_error(int64_t batch, MemoryBudget& budget) {
  try {
    runtime::Executable::compile(frontend::build_model(frontend::default_model(), {batch}), cuda_infer(&budget));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaMemoryBudget, RefusesBuffersLargerThanTheFreeDeviceMemory) {
  TRIDENT_REQUIRE_GPU();
  const uint64_t free_before = free_device_bytes();
  // A batch whose buffers need about twice what the GPU has free (linear in the batch).
  const int64_t probe = 1024;
  const uint64_t probe_bytes = estimate_at(probe).backend_bytes;
  const int64_t batch = probe * static_cast<int64_t>(2 * free_before / probe_bytes + 1);
  const runtime::MemoryEstimate est = estimate_at(batch);
  ASSERT_GT(est.backend_bytes, free_before) << "batch " << batch;

  MemoryBudget budget = MemoryBudget::for_run("", "lower --batch");
  const std::string msg = compile_error(batch, budget);
  ASSERT_FALSE(msg.empty()) << "a batch of " << batch << " compiled with " << format_bytes(free_before) << " free";
  // The budget's sentence, not the allocator's "out of GPU memory" after a cudaMalloc failed.
  EXPECT_EQ(msg.find("out of GPU memory"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("the infer graph's buffers (arena ", 0), 0u) << msg;
  EXPECT_NE(msg.find(") would take " + format_bytes(est.backend_bytes) + " of GPU memory, more than the "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(" free on the GPU; lower --batch"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // Refused before the buffers were claimed on the host or allocated on the device.
  EXPECT_EQ(budget.claimed(), 0u);
  const uint64_t free_after = free_device_bytes();
  EXPECT_LT(free_before > free_after ? free_before - free_after : 0, uint64_t{256} << 20)
      << "device memory held after the refusal";
}

TEST(CudaMemoryBudget, MaxMemoryLimitsTheHostCopiesOfAPlanThatFitsTheDevice) {
  TRIDENT_REQUIRE_GPU();
  const int64_t batch = 4096;  // about 12 MiB of input images on the host, far below the free GPU memory
  ASSERT_LT(estimate_at(batch).backend_bytes, free_device_bytes());
  MemoryBudget budget = MemoryBudget::for_run("1M", "lower --batch");
  const std::string msg = compile_error(batch, budget);
  EXPECT_EQ(msg.rfind("the infer graph's host copies would take ", 0), 0u) << msg;
  EXPECT_NE(msg.find(", more than the 1.0 MiB that --max-memory 1M allows; lower --batch"), std::string::npos) << msg;
  EXPECT_EQ(budget.claimed(), 0u);
}

TEST(CudaMemoryBudget, APlanThatFitsCompilesAndClaimsItsHostCopies) {
  TRIDENT_REQUIRE_GPU();
  const int64_t batch = 4096;
  const runtime::MemoryEstimate est = estimate_at(batch);
  MemoryBudget budget = MemoryBudget::for_run("1G", "lower --batch");
  EXPECT_EQ(compile_error(batch, budget), "");
  EXPECT_GE(budget.claimed(), est.host_bytes);
}

}  // namespace
}  // namespace trident
