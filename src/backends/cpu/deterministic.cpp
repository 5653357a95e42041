// Which of the cpu backend's kernels reduce in a thread-dependent order, and what runs instead
// in deterministic mode (deterministic.h). oneDNN 2.6 splits the minibatch among threads in
// weight gradients (convolution and inner product) and the rows among threads in batchnorm's
// statistics and its backward; cpu_ref's loops sum each output in one fixed order whatever the
// thread count (threads split only the outputs). A fused training node runs as its
// decomposition on this backend's kernels, so its convolution stays on oneDNN (each output of a
// forward or data-gradient convolution is summed by one thread) while its batchnorm takes
// cpu_ref's. tests/runtime/deterministic_test.cpp holds whole training steps to the same bits
// at 1, 2 and 3 threads.
#include "backends/cpu/deterministic.h"

#include <set>
#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu {

namespace {

// Run on cpu_ref's kernel: the reduction over rows or the minibatch is the op itself.
const std::set<std::string>& reduced_by_rows() {
  static const std::set<std::string> ops{"conv2d_backward_weight", "batchnorm2d_backward", "linear_backward_weight"};
  return ops;
}

// Run as their decomposition on this backend: a convolution (or none) and a batchnorm.
const std::set<std::string>& fused_with_batchnorm() {
  static const std::set<std::string> ops{"cbr", "cbar", "batchnorm_relu_backward"};
  return ops;
}

bool training_batchnorm(const ir::Node& node) {
  return node.op == "batchnorm2d" && node.attrs.i("training", node.outputs.size() == 5 ? 1 : 0) != 0;
}

}  // namespace

std::unique_ptr<Kernel> deterministic_kernel(const ir::Node& node, const ir::Graph& g, BackendContext& ctx) {
  if (!ctx.kernel_options().backend.deterministic) return nullptr;
  if (reduced_by_rows().count(node.op) || training_batchnorm(node)) return KernelRegistry::make("cpu_ref", node, g, ctx);
  if (fused_with_batchnorm().count(node.op)) return cpu_ref::make_decomposed_on(kBackend, node, g, ctx);
  return nullptr;
}

}  // namespace trident::cpu
