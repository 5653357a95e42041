// Channel padding on the GPU: the resize_channels kernel moves bits exactly as cpu_ref does
// (growing with zeros, shrinking by cutting; f32, f16, bf16; sizes that leave partial blocks;
// rows one 8- or 16-byte pack wide), and whole networks whose stem reads a 3-channel image
// train and infer the same with the pad_channels pass as without it, in f32 and f16. Skipped,
// with the reason, without a GPU.
#include <gtest/gtest.h>

#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

test_support::GraphBuild resize(const Shape& x, int64_t channels) {
  return [=](DType t) {
    ir::Graph g;
    g.add_node1("resize_channels", {g.add_input("x", x, t)}, {{"channels", channels}}, "y");
    return g;
  };
}

TEST(CudaResizeChannels, GrowsAndShrinksExactlyAsTheReference) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    test_support::check_rounded_reference(resize({2, 5, 7, 3}, 8), t, {"y"}, 3);
    test_support::check_rounded_reference(resize({3, 9, 13, 3}, 4), t, {"y"}, 7);  // rows of 8 or 16 bytes
    test_support::check_rounded_reference(resize({3, 4, 5, 20}, 24), t, {"y"}, 4);
    test_support::check_rounded_reference(resize({2, 4, 4, 8}, 3), t, {"y"}, 5);
    test_support::check_rounded_reference(resize({7, 3}, 3), t, {"y"}, 6);
  }
}

std::unique_ptr<runtime::Executable> network(passes::Mode mode, DType precision, bool padded) {
  passes::CompileOptions opt;
  opt.mode = mode;
  opt.backend = "cuda";
  opt.precision = precision;
  opt.channel_padding = padded ? 1 : 0;
  auto exe = runtime::Executable::compile(frontend::build_model("resnet_cifar", {8}), opt);
  EXPECT_EQ(test_support::count_op(exe->graph(), "resize_channels") > 0, padded);
  exe->init_parameters(21);
  Rng rng(22);
  for (const char* name : {"images", "labels", "lr"}) {
    if (!exe->has(name)) continue;
    TensorView v = exe->host_view(exe->value_id(name));
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (v.dtype == DType::i32) v.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
      else if (std::string(name) == "lr") v.as<float>()[i] = 0.05f;
      else v.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe->upload(exe->value_id(name));
  }
  exe->run();
  exe->synchronize();
  return exe;
}

std::vector<double> floats(const runtime::Executable& exe, const std::string& name) {
  const int id = exe.value_id(name);
  exe.download(id);
  const TensorView t = exe.host_view(id);
  return std::vector<double>(t.as<float>(), t.as<float>() + t.numel());
}

// Padding adds only zero products, but cuDNN picks other kernels for 4 channels than for 3,
// so the sums may round differently: the steps agree within the network tolerance of the
// precision (see network_test.cpp), not bit for bit.
TEST(CudaChannelPadding, PaddedTrainingStepMatchesUnpadded) {
  TRIDENT_REQUIRE_GPU();
  for (DType precision : {DType::f32, DType::f16}) {
    auto padded = network(passes::Mode::Train, precision, true), plain = network(passes::Mode::Train, precision, false);
    const double tol = precision == DType::f16 ? 2e-2 : 1e-3;
    for (const char* name : {"conv1.weight", "conv1.weight.momentum", "bn1.running_mean", "fc.weight",
                             "fc.weight.momentum"}) {
      ASSERT_TRUE(plain->has(name)) << name;
      const double t = std::string(name).ends_with("momentum") ? 10 * tol : tol;  // gradients: see network_test.cpp
      test_support::expect_close_norm(floats(*padded, name), floats(*plain, name), t,
                                      std::string(dtype_name(precision)) + " " + name);
    }
    EXPECT_EQ(padded->find("conv1.weight").shape, plain->find("conv1.weight").shape)
        << "the padding never reaches a parameter";
  }
}

TEST(CudaChannelPadding, PaddedInferenceMatchesUnpadded) {
  TRIDENT_REQUIRE_GPU();
  for (DType precision : {DType::f32, DType::f16}) {
    auto padded = network(passes::Mode::Infer, precision, true), plain = network(passes::Mode::Infer, precision, false);
    const std::string logits = padded->graph().value(padded->logits()).name;
    test_support::expect_close_norm(floats(*padded, logits), floats(*plain, logits),
                                    precision == DType::f16 ? 2e-2 : 1e-3, "logits");
  }
}

}  // namespace
}  // namespace trident
