// The cuda backend's softmax cross-entropy against cpu_ref: the batch-mean loss and the
// gradient for f32 and f16 logits, over class counts from 3 to several thousand and batches
// that leave blocks partly idle; and the loss is the same bits when computed twice.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

using test_support::compare_with_cpu_ref;

// logits [N,K] in `d`; labels are drawn in 0..2 by the runner, so K ≥ 3.
ir::Graph loss_graph(DType d, int64_t N, int64_t K) {
  ir::Graph g;
  const int logits = g.add_input("logits", {N, K}, d);
  const int labels = g.add_input("labels", {N}, DType::i32);
  g.add_node1("softmax_cross_entropy", {logits, labels}, {}, "loss");
  g.add_node1("softmax_cross_entropy_backward", {logits, labels, g.add_input("dloss", {1}, d)}, {}, "dlogits");
  return g;
}

TEST(CudaLoss, SoftmaxCrossEntropyForwardAndBackward) {
  TRIDENT_REQUIRE_GPU();
  for (auto [N, K] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {7, 10}, {256, 10}, {33, 1000}, {3, 5003}})
    for (DType t : {DType::f32, DType::f16}) {
      SCOPED_TRACE("N " + std::to_string(N) + " K " + std::to_string(K) + " " + std::string(dtype_name(t)));
      compare_with_cpu_ref(loss_graph(t, N, K), loss_graph(DType::f32, N, K), {"loss", "dlogits"}, t, 31);
    }
}

TEST(CudaLoss, LossIsBitwiseReproducible) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = loss_graph(DType::f32, 512, 1000);
  auto run = [&](const char* name) {
    test_support::GraphRunner r(g, "cuda");
    r.randomize(32);
    r.run();
    return r.values(g.find_value(name));
  };
  EXPECT_EQ(run("loss"), run("loss"));
  EXPECT_EQ(run("dlogits"), run("dlogits"));
}

}  // namespace
}  // namespace trident
