// Which of the cpu backend's kernels run on cpu_ref's instead (reference_routing.h). Deterministic
// mode: the ops oneDNN reduces in a thread-dependent order. oneDNN 2.6 splits the minibatch among threads in
// weight gradients (convolution and inner product) and the rows among threads in batchnorm's
// statistics and its backward; cpu_ref's loops sum each output in one fixed order whatever the
// thread count (threads split only the outputs). A fused training node runs as its
// decomposition on this backend's kernels, so its convolution stays on oneDNN (each output of a
// forward or data-gradient convolution is summed by one thread) while its batchnorm takes
// cpu_ref's. tests/runtime/deterministic_test.cpp holds whole training steps to the same bits
// at 1, 2 and 3 threads. Sync-BN: the batchnorms of training (alone or in a fused node, which
// runs as its decomposition the same way), whose cpu_ref kernels sum their statistics and
// backward sums over the ranks; tests/runtime/distributed/data_parallel_mpi.cpp holds them to a
// single process of the global batch.
#include "backends/cpu/reference_routing.h"

#include <set>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/kernels.h"
#include "core/world.h"
#include "ops/conv_stages.h"

namespace trident::cpu {

namespace {

// Run on cpu_ref's kernel in deterministic mode: the reduction over the minibatch is the op itself
// (weight gradients), or the op is a GEMM that oneDNN's AVX2 sgemm may split along its reduced
// axis among threads (the linear layer and its data gradient; AVX-512 machines do not, but a
// classifier costs little either way).
const std::set<std::string>& thread_dependent_sums() {
  static const std::set<std::string> ops{"conv2d_backward_weight", "linear_backward_weight", "linear",
                                         "linear_backward_data"};
  return ops;
}

// Run as their decomposition on this backend: a convolution (or none) and a batchnorm.
const std::set<std::string>& fused_with_batchnorm() {
  static const std::set<std::string> ops{"cbr", "cbar", "bn_relu", "batchnorm_relu_backward"};
  return ops;
}

// oneDNN 2's int8 convolution adds each pair of u8·s8 products in 16 bits with saturation on a
// CPU without VNNI instructions (AVX2, or AVX-512 without DL Boost: vpmaddubsw), so a pair past
// ±32767 is clipped and the result is wrong, not merely rounded; there an int8 conv2d_epilogue
// runs as its decomposition on this backend's kernels (the grids' values convolved in f32),
// which gives the decomposition's numbers without the integer kernel's speed.
bool int8_sums_exact_here() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
  return (isa & vnni) == vnni;
}

// The decomposition of an int8 convolution on such a CPU, saying so in `explain`.
class Int8InFloat final : public Kernel {
 public:
  explicit Int8InFloat(std::unique_ptr<Kernel> decomposed) : decomposed_(std::move(decomposed)) {}
  void prepare(const KernelArgs& args) override { decomposed_->prepare(args); }
  void run(const KernelArgs& args) override { decomposed_->run(args); }
  std::string implementation() const override {
    return "int8 grids computed in f32: this CPU has no VNNI, where oneDNN's int8 convolution saturates (" +
           decomposed_->implementation() + ")";
  }

 private:
  std::unique_ptr<Kernel> decomposed_;
};

// A batchnorm of training, forward or backward: a reduction over the rows per channel.
bool training_batchnorm(const ir::Node& node) {
  return node.op == "batchnorm2d_backward" ||
         (node.op == "batchnorm2d" && node.attrs.i("training", node.outputs.size() == 5 ? 1 : 0) != 0);
}

}  // namespace

std::unique_ptr<Kernel> reference_kernel(const ir::Node& node, const ir::Graph& g, BackendContext& ctx) {
  if (node.op == "conv2d_epilogue" && !int8_sums_exact_here() && ops::ConvStages::of(node).int8)
    return std::make_unique<Int8InFloat>(cpu_ref::make_decomposed_on(kBackend, node, g, ctx));
  const BackendOptions& options = ctx.kernel_options().backend;
  // One rank sums nothing: its batchnorms keep the cpu kernels.
  const distributed::World* bn_world = options.batchnorm_world();
  const bool deterministic = options.deterministic, sync_bn = bn_world && bn_world->size() > 1;
  if (!deterministic && !sync_bn) return nullptr;
  if (training_batchnorm(node) || (deterministic && thread_dependent_sums().count(node.op)))
    return KernelRegistry::make("cpu_ref", node, g, ctx);
  if (fused_with_batchnorm().count(node.op)) return cpu_ref::make_decomposed_on(kBackend, node, g, ctx);
  return nullptr;
}

}  // namespace trident::cpu
