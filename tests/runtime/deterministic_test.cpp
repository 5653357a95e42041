// BackendOptions::deterministic on the CPU backends: whole training steps of networks with
// every fused training op (cbr, cbar, their backward, the classifier) give the same bits at 1,
// 2 and 3 threads and on a second run, and the timing-free choices make the same kernels.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/host_threads.h"

using namespace trident;

namespace {

std::unique_ptr<runtime::Executable> compile_training(const std::string& model, const std::string& backend,
                                                      bool deterministic) {
  const ir::Graph g = frontend::build_model(model, {.batch = 8});
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = backend;
  BackendOptions backend_options;
  backend_options.deterministic = deterministic;
  return runtime::Executable::compile(g, opt, backend_options);
}

// Every parameter, momentum and running statistic after `steps` steps at `threads` threads.
std::vector<std::vector<std::byte>> train(runtime::Executable& exe, int threads, int steps) {
  exe.init_parameters(3);
  Rng r(2);
  TensorView img = exe.find("images"), lab = exe.find("labels");
  for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(r.uniform(-1, 1));
  for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 10);
  exe.find("lr").as<float>()[0] = 0.05f;
  runtime::HostThreads::configure(threads, runtime::ThreadPolicy::Fixed);
  for (int s = 0; s < steps; ++s) exe.run();
  std::vector<std::vector<std::byte>> state;
  for (int v = 0; v < exe.graph().num_values(); ++v) {
    const ir::Value& val = exe.graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    const TensorView t = exe.view(v);
    const auto* p = static_cast<const std::byte*>(t.data);
    state.emplace_back(p, p + t.bytes());
  }
  return state;
}

class Deterministic : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Deterministic, TrainingStepsAreTheSameBitsAtEveryThreadCount) {
  const auto& [backend, model] = GetParam();
  if (!KernelRegistry::has(backend, "conv2d")) GTEST_SKIP() << "this build has no " << backend << " backend";
  auto exe = compile_training(model, backend, true);
  const auto one = train(*exe, 1, 3);
  ASSERT_GT(one.size(), 10u);
  for (int threads : {2, 3, 1}) {
    const auto other = train(*exe, threads, 3);
    ASSERT_EQ(other.size(), one.size());
    int differing = 0;
    for (size_t i = 0; i < one.size(); ++i) differing += other[i] != one[i];
    EXPECT_EQ(differing, 0) << differing << " of " << one.size() << " tensors differ at " << threads
                            << " threads from the 1-thread run";
  }
  auto again = compile_training(model, backend, true);
  EXPECT_TRUE(train(*again, 2, 3) == one) << "a second executable differs";
  runtime::HostThreads::configure(0, runtime::ThreadPolicy::Fixed);
}

INSTANTIATE_TEST_SUITE_P(Models, Deterministic,
                         ::testing::Combine(::testing::Values("cpu", "cpu_ref"),
                                            ::testing::Values("fmnist_cnn", "resnet_cifar")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// Deterministic mode is a build-time choice of kernels: a fused training node of the cpu
// backend runs as its decomposition there (its batchnorm on fixed-order sums), and only then.
std::string cbr_implementation(const runtime::Executable& exe) {
  std::string name;
  for (int id : exe.graph().order())
    if (exe.graph().node(id).op == "cbr") name = exe.graph().node(id).name;
  for (const auto& [node, how] : exe.kernel_implementations())
    if (node == name) return how;
  return "";
}

TEST(DeterministicCpu, RunsFusedTrainingNodesAsTheirDecompositionOnlyWhenAsked) {
  if (!KernelRegistry::has("cpu", "conv2d")) GTEST_SKIP() << "this build has no cpu backend";
  const std::string fixed = cbr_implementation(*compile_training("fmnist_cnn", "cpu", true));
  EXPECT_NE(fixed.find("decomposition: conv2d"), std::string::npos) << fixed;
  const std::string fast = cbr_implementation(*compile_training("fmnist_cnn", "cpu", false));
  EXPECT_EQ(fast.find("decomposition"), std::string::npos) << fast;
}

}  // namespace
