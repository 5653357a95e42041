// Sync-BN on the cuda backend (backends/cuda/batchnorm_rank_sum.h). One GPU holds one NCCL rank,
// so the collective itself runs over a world of one rank (test_support::OneRankWorld): every
// node with a training batchnorm — the fused cbr/cbar/conv_bn_stats and batchnorm_relu_backward
// of ResNet-20's plan, bn_relu of a pre-activation block, batchnorm2d and its backward with the
// fusions off — must then say it sums its statistics over one rank and train the bits of plain
// batchnorm, in fp32, fp16 and bf16. What one rank cannot show, that the totals of several
// ranks enter the right formulas, the launchers show with a stand-in collective: two ranks that
// hold the same batch double every total and the row count, which leaves the output, the saved
// statistics, dx, dγ and dβ the bits of one rank and changes only the running variance's
// unbiasing factor. The two-GPU equivalence runs under mpirun where two GPUs exist.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "support/gpu_compare.h"
#include "support/gpu_training.h"
#include "support/graph_queries.h"
#include "support/one_rank_world.h"

#ifdef TRIDENT_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/device/batchnorm.h"
#endif

namespace trident {
namespace {

// A pooling, then a pre-activation block (batchnorm → relu → convolution: bn_relu) and a CBR.
ir::Graph pre_activation_model() {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {16, 16, 16, 3});
  x = b.maxpool(b.cbr(x, 16, 3, 1, 1, "stem"), 2, 2, 0, "pool");
  x = b.conv(b.relu(b.batchnorm(x, "pre.bn"), "pre.relu"), 32, 3, 1, 1, {}, "pre.conv");
  x = b.cbr(x, 32, 3, 1, 1, "block");
  x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten");
  g.mark_output(b.linear(x, 10, true, "fc"));
  return g;
}

struct Plan {
  const char* name;
  ir::Graph model;
  std::vector<std::string> disabled;       // passes turned off
  std::vector<const char*> batchnorm_ops;  // the nodes that must sum over the ranks
};

const std::vector<Plan>& plans() {
  static const std::vector<Plan> all{
      {"fused", frontend::build_model("resnet_cifar", {.batch = 16}), {}, {"cbr", "batchnorm_relu_backward"}},
      {"bn_relu", pre_activation_model(), {}, {"bn_relu", "cbr", "batchnorm_relu_backward"}},
      {"plain", frontend::build_model("resnet_cifar", {.batch = 16}), {"fuse_conv_bn_relu", "fuse_bn_relu"},
       {"batchnorm2d", "batchnorm2d_backward"}},
  };
  return all;
}

passes::CompileOptions train_options(DType precision, const Plan& plan) {
  passes::CompileOptions opt = runtime::default_compile_options(passes::Mode::Train);
  opt.backend = "cuda";
  opt.precision = precision;
  opt.disabled_passes = plan.disabled;
  return opt;
}

BackendOptions synced_over_one_rank() {
  BackendOptions o;
  o.world = std::make_shared<test_support::OneRankWorld>();
  o.sync_batchnorm = true;
  return o;
}

class GpuSyncBatchnorm : public ::testing::TestWithParam<DType> {};

TEST_P(GpuSyncBatchnorm, OneRankOfNcclTrainsThePlainBatchnormsBits) {
  TRIDENT_REQUIRE_GPU();
  for (const Plan& plan : plans()) {
    SCOPED_TRACE(plan.name);
    const ir::Graph& model = plan.model;
    const passes::CompileOptions opt = train_options(GetParam(), plan);
    std::vector<std::vector<std::byte>> synced;
    try {
      BackendOptions backend = synced_over_one_rank();
      backend.deterministic = true;
      auto exe = runtime::Executable::compile(model, opt, backend);
      int nodes = 0, summing = 0;
      for (const char* op : plan.batchnorm_ops) {
        const int n = test_support::count_op(exe->graph(), op);
        EXPECT_GT(n, 0) << "the plan has no " << op;
        nodes += n;
      }
      for (const auto& [name, how] : exe->kernel_implementations())
        summing += how.find("summed over 1 rank by NCCL") != std::string::npos;
      EXPECT_GE(summing, nodes) << "fewer kernels sum their statistics over the ranks than there are batchnorm nodes";
      synced = test_support::train_deterministic_on_gpu(model, opt, 4, 10, synced_over_one_rank());
    } catch (const Error& e) {
      if (test_support::nccl_missing(e)) GTEST_SKIP() << "NCCL is not installed here: " << e.what();
      throw;
    }
    const auto plain = test_support::train_deterministic_on_gpu(model, opt, 4, 10);
    ASSERT_EQ(synced.size(), plain.size());
    ASSERT_GT(synced.size(), 10u);
    const int differing = test_support::differing_tensors(synced, plain);
    EXPECT_EQ(differing, 0) << differing << " of " << synced.size() << " tensors differ from plain batchnorm";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuSyncBatchnorm, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

#ifdef TRIDENT_HAVE_CUDA

namespace device = cuda::device;

// Device memory holding a host vector, read back on request.
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    if (cudaMalloc(&p_, n_ * sizeof(T)) != cudaSuccess) throw Error("cudaMalloc failed");
    cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> read() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

std::vector<float> random_floats(size_t n, uint64_t seed, double lo, double hi) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// A collective of two ranks that hold the same batch: every sum doubles.
device::RankSum two_identical_ranks() {
  device::RankSum twice;
  twice.ranks = 2;
  twice.sum = [](const double* in, double* out, size_t n, cudaStream_t stream) {
    std::vector<double> h(n);
    cudaMemcpyAsync(h.data(), in, n * sizeof(double), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    for (double& v : h) v *= 2;
    cudaMemcpyAsync(out, h.data(), n * sizeof(double), cudaMemcpyHostToDevice, stream);
    cudaStreamSynchronize(stream);
  };
  return twice;
}

// One training forward and backward of an f32 batchnorm over [M, C]: everything it writes.
struct BatchnormRun {
  std::vector<float> y, saved_mean, saved_invstd, running_mean, running_var, dx, dgamma, dbeta;
};

BatchnormRun run_batchnorm(int64_t M, int64_t C, const device::RankSum* over_ranks) {
  using device::ChannelTensor;
  const auto f32 = device::ElemType::f32;
  const size_t n = static_cast<size_t>(M * C), c = static_cast<size_t>(C);
  const std::vector<float> zeros_n(n), zeros_c(c);
  DeviceVector<float> x(random_floats(n, 11, -2, 3)), dy(random_floats(n, 12, -1, 1)), y(zeros_n), dx(zeros_n),
      gamma(random_floats(c, 13, 0.5, 1.5)), beta(random_floats(c, 14, -1, 1)), rm(random_floats(c, 15, -0.1, 0.1)),
      rv(random_floats(c, 16, 0.9, 1.1)), mean(zeros_c), invstd(zeros_c), dgamma(zeros_c), dbeta(zeros_c);
  const device::ChannelReductionPlan plan = device::plan_channel_reduction(M, C, f32, 132);
  const std::vector<char> zero_workspace(plan.workspace_bytes);
  DeviceVector<char> workspace(zero_workspace);

  device::BatchNormTrainArgs fwd;
  fwd.x = x.get();
  fwd.y = y.get();
  fwd.gamma = ChannelTensor{gamma.get(), f32};
  fwd.beta = ChannelTensor{beta.get(), f32};
  fwd.running_mean = fwd.running_mean_out = ChannelTensor{rm.get(), f32};
  fwd.running_var = fwd.running_var_out = ChannelTensor{rv.get(), f32};
  fwd.saved_mean = ChannelTensor{mean.get(), f32};
  fwd.saved_invstd = ChannelTensor{invstd.get(), f32};
  device::launch_batchnorm_train(f32, plan, fwd, workspace.get(), nullptr, over_ranks);

  device::BatchNormBackwardArgs bwd;
  bwd.x = x.get();
  bwd.dy = dy.get();
  bwd.dx = dx.get();
  bwd.gamma = fwd.gamma;
  bwd.saved_mean = fwd.saved_mean;
  bwd.saved_invstd = fwd.saved_invstd;
  bwd.dgamma = ChannelTensor{dgamma.get(), f32};
  bwd.dbeta = ChannelTensor{dbeta.get(), f32};
  device::launch_batchnorm_backward(f32, plan, bwd, workspace.get(), nullptr, over_ranks);
  if (cudaDeviceSynchronize() != cudaSuccess) throw Error("the batchnorm kernels failed");
  return {y.read(),  mean.read(), invstd.read(), rm.read(), rv.read(), dx.read(), dgamma.read(), dbeta.read()};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GpuSyncBatchnorm, TwoRanksOfOneBatchKeepItsStatisticsAndGradients) {
  TRIDENT_REQUIRE_GPU();
  // C = 16 takes the vector path, C = 10 the scalar one.
  for (const int64_t C : {int64_t{16}, int64_t{10}}) {
    SCOPED_TRACE("C = " + std::to_string(C));
    const int64_t M = 4 * 9 * 9;
    const device::RankSum twice = two_identical_ranks();
    const BatchnormRun one = run_batchnorm(M, C, nullptr), two = run_batchnorm(M, C, &twice);
    EXPECT_TRUE(same_bits(one.y, two.y));
    EXPECT_TRUE(same_bits(one.saved_mean, two.saved_mean));
    EXPECT_TRUE(same_bits(one.saved_invstd, two.saved_invstd));
    EXPECT_TRUE(same_bits(one.running_mean, two.running_mean));
    EXPECT_TRUE(same_bits(one.dx, two.dx)) << "dx must use the global sums over the global row count";
    EXPECT_TRUE(same_bits(one.dgamma, two.dgamma)) << "dγ must stay the rank's own sum";
    EXPECT_TRUE(same_bits(one.dbeta, two.dbeta)) << "dβ must stay the rank's own sum";
    // running_var = 0.9·rv + 0.1·var·M'/(M'−1) with M' = M and 2M.
    const std::vector<float> rv0 = random_floats(static_cast<size_t>(C), 16, 0.9, 1.1);
    for (int64_t c = 0; c < C; ++c) {
      const double var = 1.0 / (static_cast<double>(one.saved_invstd[c]) * one.saved_invstd[c]) - 1e-5;
      const double m = static_cast<double>(M);
      const double want_one = 0.9 * rv0[c] + 0.1 * var * m / (m - 1);
      const double want_two = 0.9 * rv0[c] + 0.1 * var * 2 * m / (2 * m - 1);
      EXPECT_NEAR(one.running_var[c], want_one, 1e-5 * want_one) << c;
      EXPECT_NEAR(two.running_var[c], want_two, 1e-5 * want_two) << c;
      EXPECT_NE(one.running_var[c], two.running_var[c]) << c;
    }
  }
}

#endif  // TRIDENT_HAVE_CUDA

}  // namespace
}  // namespace trident
