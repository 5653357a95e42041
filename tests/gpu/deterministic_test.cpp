// BackendOptions::deterministic on the cuda backend: two executables compiled apart (plans
// chosen again, buffers elsewhere) train a ResNet for a few steps, replayed as CUDA graphs, to
// the same bits in fp32, fp16 and bf16: every parameter, momentum and running statistic.
// Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

std::vector<std::vector<std::byte>> train_deterministic(DType precision) {
  const ir::Graph model = frontend::build_model("resnet_cifar", {.batch = 16});
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  BackendOptions backend;
  backend.deterministic = true;
  auto exe = runtime::Executable::compile(model, opt, backend);
  exe->init_parameters(5);
  Rng rng(3);
  for (const char* name : {"images", "labels", "lr"}) {
    const int id = exe->value_id(name);
    TensorView t = exe->host_view(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
      else if (std::string(name) == "lr") t.as<float>()[i] = 0.05f;
      else t.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe->upload(id);
  }
  for (int step = 0; step < 4; ++step) exe->run();
  std::vector<std::vector<std::byte>> state;
  for (int v = 0; v < exe->graph().num_values(); ++v) {
    const ir::Value& val = exe->graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    exe->download(v);
    const TensorView t = exe->host_view(v);
    const auto* p = static_cast<const std::byte*>(t.data);
    state.emplace_back(p, p + t.bytes());
  }
  return state;
}

class GpuDeterministic : public ::testing::TestWithParam<DType> {};

TEST_P(GpuDeterministic, TwoExecutablesTrainToTheSameBits) {
  TRIDENT_REQUIRE_GPU();
  const auto first = train_deterministic(GetParam());
  const auto second = train_deterministic(GetParam());
  ASSERT_EQ(first.size(), second.size());
  ASSERT_GT(first.size(), 10u);
  int differing = 0;
  for (size_t i = 0; i < first.size(); ++i) differing += first[i] != second[i];
  EXPECT_EQ(differing, 0) << differing << " of " << first.size() << " tensors differ between the two runs";
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuDeterministic, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace trident
