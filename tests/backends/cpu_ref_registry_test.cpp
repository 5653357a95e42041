// cpu_ref registration: every op of docs/OPS.md has a kernel, unknown ops fail with a
// sentence naming backend, op and node, and kernels reject unsupported dtypes by name.
#include "backends/gradcheck.h"

namespace trident::testing {
namespace {

TEST(CpuRefRegistry, EveryOpOfTheSpecHasAKernel) {
  const char* ops[] = {"conv2d", "batchnorm2d", "relu", "add", "maxpool2d", "avgpool2d",
                       "global_avgpool", "flatten", "reshape", "linear", "softmax_cross_entropy",
                       "fill", "conv2d_backward_data", "conv2d_backward_weight",
                       "batchnorm2d_backward", "relu_backward", "maxpool2d_backward",
                       "avgpool2d_backward", "global_avgpool_backward", "linear_backward_data",
                       "linear_backward_weight", "softmax_cross_entropy_backward", "sgd_update",
                       "allreduce_mean", "allreduce_wait"};
  for (const char* op : ops) EXPECT_TRUE(KernelRegistry::has("cpu_ref", op)) << op;
}

TEST(CpuRefRegistry, UnknownOpNamesEverything) {
  const ir::Node node = make_node("frobnicate", "node_n1");
  ir::Graph g;
  try {
    KernelRegistry::make("cpu_ref", node, g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cpu_ref"), std::string::npos) << m;
    EXPECT_NE(m.find("frobnicate"), std::string::npos) << m;
    EXPECT_NE(m.find("node_n1"), std::string::npos) << m;
  }
}

TEST(CpuRefRegistry, HalfPrecisionIsRejectedByName) {
  HostTensor x({4}, DType::f16), y({4}, DType::f16);
  try {
    run_op("relu", {}, {&x}, {&y});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test_relu"), std::string::npos) << m;
    EXPECT_NE(m.find("f16"), std::string::npos) << m;
  }
}

TEST(CpuRefRegistry, WrongArityIsAnError) {
  HostTensor x({4}, DType::f32), y({4}, DType::f32);
  EXPECT_THROW(run_op("add", {}, {&x}, {&y}), Error);
}

}  // namespace
}  // namespace trident::testing
