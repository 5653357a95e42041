// The cuda softmax cross-entropy's own promise beyond agreement with cpu_ref (which the op case
// table, support/op_cases/linear_loss_sgd_cases.cpp, checks on every backend): the loss and its
// gradient are the same bits when computed twice, on a batch of many blocks.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using test_support::run_once_on_gpu;

TEST(CudaLoss, LossIsBitwiseReproducible) {
  TRIDENT_REQUIRE_GPU();
  ir::Graph g;
  const int logits = g.add_input("logits", {512, 1000});
  const int labels = g.add_input("labels", {512}, DType::i32);
  g.add_node1("softmax_cross_entropy", {logits, labels}, {}, "loss");
  g.add_node1("softmax_cross_entropy_backward", {logits, labels, g.add_input("dloss", {1})}, {}, "dlogits");
  EXPECT_EQ(run_once_on_gpu(g, "loss", 32), run_once_on_gpu(g, "loss", 32));
  EXPECT_EQ(run_once_on_gpu(g, "dlogits", 32), run_once_on_gpu(g, "dlogits", 32));
}

}  // namespace
}  // namespace trident
