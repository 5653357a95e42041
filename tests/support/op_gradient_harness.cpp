// The op case table's finite-difference mode: a case of one node is built again in f64, its op's
// backward rule appended exactly as autodiff emits it, and every input gradient the rule gives is
// compared on cpu_ref with central differences of L = Σ G·output0 at sampled elements. So each
// backward rule is checked on the graphs the cross-backend harness already holds, not on a second
// set of hand-written ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "ir/op_registry.h"
#include "support/op_case.h"

namespace trident::test_support {
namespace {

constexpr int kElementsPerInput = 6;  // sampled per differentiated input (sampled_elements)

// The node of a one-node case, or -1.
int only_node(const ir::Graph& g) { return g.order().size() == 1 ? g.order()[0] : -1; }

// The bytes of every value that is not computed (inputs, parameters, states), to put back before
// each run: in-place outputs (running statistics, optimizer state) write over their inputs.
struct Snapshot {
  std::vector<std::pair<int, std::vector<std::byte>>> values;

  Snapshot(GraphRunner& r, const ir::Graph& g) {
    for (int v = 0; v < g.num_values(); ++v) {
      if (g.value(v).role == ir::ValueRole::Activation) continue;
      const TensorView t = r.view(v);
      const auto* p = static_cast<const std::byte*>(t.data);
      values.emplace_back(v, std::vector<std::byte>(p, p + t.bytes()));
    }
  }
  void restore(GraphRunner& r) const {
    for (const auto& [v, bytes] : values) std::memcpy(r.view(v).data, bytes.data(), bytes.size());
  }
};

double weighted_sum(const std::vector<double>& g, const std::vector<double>& y) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += g[i] * y[i];
  return s;
}

// The first and last elements, the one of the largest analytic gradient (a max pooling's input
// has mostly zero gradients), and some drawn.
std::vector<int64_t> sampled_elements(const std::vector<double>& analytic, uint64_t seed) {
  const auto n = static_cast<int64_t>(analytic.size());
  int64_t largest = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(analytic[static_cast<size_t>(i)]) > std::abs(analytic[static_cast<size_t>(largest)])) largest = i;
  std::vector<int64_t> at{0, n - 1, largest};
  Rng rng(seed);
  for (int k = 3; k < kElementsPerInput; ++k) at.push_back(static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n)));
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

}  // namespace

std::string op_case_gradient_skip_reason(const OpCase& c) {
  ir::Graph g;
  try {
    g = c.build(DType::f64);
  } catch (const Error& e) {
    return std::string("not built in f64: ") + e.what();
  }
  const int nid = only_node(g);
  if (nid < 0) return "a graph of " + std::to_string(g.order().size()) + " nodes (the mode takes one node)";
  const ir::Node& n = g.node(nid);
  const ir::OpDef& def = ir::OpRegistry::get(n.op);
  if (!def.backward) return "'" + n.op + "' has no backward rule";
  if (g.value(n.outputs[0]).dtype != DType::f64) return "the first output of '" + n.op + "' is not real";
  std::vector<int> output_grads(n.outputs.size(), -1);
  output_grads[0] = g.add_input("gradient", g.value(n.outputs[0]).shape, DType::f64);
  try {
    def.backward(g, ir::Node(n), output_grads);
  } catch (const Error& e) {
    return "'" + n.op + "''s backward rule refuses this form: " + e.what();  // inference-mode batch norms
  }
  return {};
}

void check_op_case_gradient(const OpCase& c) {
  ir::Graph g = c.build(DType::f64);
  const int nid = only_node(g);
  ASSERT_GE(nid, 0) << c.name;
  const ir::Node fwd = g.node(nid);  // a copy: the rule adds nodes to g
  const ir::OpDef& def = ir::OpRegistry::get(fwd.op);
  const int y = fwd.outputs[0];
  const int grad_y = g.add_input("fd_gradient_of_" + g.value(y).name, g.value(y).shape, DType::f64);
  std::vector<int> output_grads(fwd.outputs.size(), -1);
  output_grads[0] = grad_y;
  const std::vector<int> grads = def.backward(g, fwd, output_grads);
  ASSERT_EQ(grads.size(), fwd.inputs.size()) << fwd.op << ": one gradient (or -1) per input";

  GraphRunner r(g, "cpu_ref");
  r.randomize(17);
  if (c.prepare) c.prepare(r, g);
  const Snapshot drawn(r, g);
  drawn.restore(r);
  r.run();
  const std::vector<double> gy = r.values(grad_y);
  std::vector<std::vector<double>> analytic_of(fwd.inputs.size());  // every rule's gradient, from this one run
  for (size_t i = 0; i < fwd.inputs.size(); ++i)
    if (grads[i] >= 0) analytic_of[i] = r.values(grads[i]);

  int checked_inputs = 0;
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    const int x = fwd.inputs[i];
    if (grads[i] < 0 || g.value(x).dtype != DType::f64 || g.value(x).role == ir::ValueRole::Activation) continue;
    ++checked_inputs;
    const std::vector<double>& analytic = analytic_of[i];
    double scale = 1;
    for (double a : analytic) scale = std::max(scale, std::abs(a));
    for (int64_t k : sampled_elements(analytic, 1000 + i)) {
      auto loss_at = [&](double delta) {
        drawn.restore(r);
        r.view(x).as<double>()[k] += delta;
        r.run();
        return weighted_sum(gy, r.values(y));
      };
      drawn.restore(r);  // x as drawn, not as the last perturbed run left it
      const double h = 1e-6 * std::max(1.0, std::abs(r.view(x).as<double>()[k]));
      const double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
      const double a = analytic[static_cast<size_t>(k)];
      EXPECT_LE(std::abs(numeric - a), 1e-6 * scale + 1e-5 * std::abs(numeric))  // NaN fails
          << c.name << ": d(Σ G·" << g.value(y).name << ")/d " << g.value(x).name << "[" << k << "] is " << a
          << " by '" << fwd.op << "''s backward rule, " << numeric << " by central differences";
    }
  }
  EXPECT_GT(checked_inputs, 0) << c.name << ": '" << fwd.op << "''s backward rule gives no input gradient to check";
}

}  // namespace trident::test_support
