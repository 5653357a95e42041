// The cuda sgd_update beyond the op case table (support/op_cases/linear_loss_sgd_cases.cpp, the
// tensor table with separate buffers, on every backend): the single flat loop, on tensors end to
// end in one buffer as the planner lays out the flat parameter, gradient and momentum buffers,
// against cpu_ref on the same views; and identical bits on a re-run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/kernel.h"
#include "ir/graph.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"

namespace trident {
namespace {

const std::vector<Shape> kParamShapes = {{3}, {10, 3, 3, 3}, {64}, {1000, 7}, {5}};

// The table's sgd_update cases over kParamShapes: lr, then params, grads and momentum buffers.
const char* const kHyper[] = {"plain", "momentum", "nesterov"};
ir::Graph sgd_graph(const char* hyper) {
  return test_support::op_case(std::string("sgd_update_tensor_table_") + hyper).build(DType::f32);
}

std::vector<std::string> updated_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kParamShapes.size(); ++i) {
    names.push_back("p" + std::to_string(i));
    names.push_back("m" + std::to_string(i));
  }
  return names;
}

// Runs the sgd_update kernel on views that lie end to end in three device buffers, against
// cpu_ref on host copies of the same numbers.
TEST(CudaOptimizer, SgdOverEndToEndBuffersMatchesReference) {
  TRIDENT_REQUIRE_GPU();
  for (const char* h : kHyper) {
    SCOPED_TRACE(h);
    const ir::Graph g = sgd_graph(h);
    const ir::Node& node = g.node(g.order().at(0));
    const size_t n = kParamShapes.size();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(g.value(node.inputs[1 + i]).shape, kParamShapes[i]) << "table case";
    int64_t total = 0;
    for (const Shape& s : kParamShapes) total += numel(s);
    // Host data: lr, then params, grads and momentum, each flat.
    std::vector<float> lr{0.05f}, host[3];
    Rng rng(42);
    for (auto& v : host) {
      v.resize(static_cast<size_t>(total));
      for (float& x : v) x = static_cast<float>(rng.uniform(-1.0, 1.0));
    }
    auto views = [&](void* lr_p, void* bufs[3]) {
      KernelArgs args{node, {}, {}};
      args.in.push_back({lr_p, {1}, DType::f32});
      for (int b = 0; b < 3; ++b) {
        int64_t off = 0;
        for (const Shape& s : kParamShapes) {
          args.in.push_back({static_cast<float*>(bufs[b]) + off, s, DType::f32});
          off += numel(s);
        }
      }
      for (int b : {0, 2})
        for (size_t i = 0; i < n; ++i) args.out.push_back(args.in[1 + b * n + i]);
      return args;
    };
    // Reference on the host.
    std::vector<float> ref[3] = {host[0], host[1], host[2]};
    void* ref_bufs[3] = {ref[0].data(), ref[1].data(), ref[2].data()};
    KernelRegistry::make("cpu_ref", node, g)->run(views(lr.data(), ref_bufs));
    // The same on the GPU.
    std::shared_ptr<BackendContext> ctx = KernelRegistry::make_context("cuda");
    void* dev_lr = ctx->allocate(sizeof(float));
    void* dev[3];
    for (int b = 0; b < 3; ++b) {
      dev[b] = ctx->allocate(sizeof(float) * static_cast<size_t>(total));
      ctx->copy_to_device(dev[b], host[b].data(), sizeof(float) * host[b].size());
    }
    ctx->copy_to_device(dev_lr, lr.data(), sizeof(float));
    KernelRegistry::make("cuda", node, g, *ctx)->run(views(dev_lr, dev));
    ctx->synchronize();
    std::vector<float> got[3] = {host[0], host[1], host[2]};
    for (int b = 0; b < 3; ++b) ctx->copy_to_host(got[b].data(), dev[b], sizeof(float) * got[b].size());
    for (int b : {0, 2}) {
      std::vector<double> a(got[b].begin(), got[b].end()), r(ref[b].begin(), ref[b].end());
      test_support::expect_close(a, r, DType::f32, b == 0 ? "parameters" : "momentum");
    }
    ctx->free(dev_lr);
    for (void* p : dev) ctx->free(p);
  }
}

TEST(CudaOptimizer, RunsAreBitwiseIdentical) {
  TRIDENT_REQUIRE_GPU();
  const ir::Graph g = sgd_graph(kHyper[2]);
  auto run = [&] {
    test_support::GraphRunner r(g, "cuda");
    r.randomize(43);
    r.run(3);  // three steps: the table is uploaded once and reused
    std::vector<double> all;
    for (const std::string& name : updated_names())
      for (double v : r.values(g.find_value(name))) all.push_back(v);
    return all;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace trident
