// Test support: runs the nodes of a graph, in order, on one backend, with one buffer per
// value (outputs that alias an input share its buffer, as the memory planner would make
// them). Lets a test compare a fused node with its decomposition without the pass pipeline.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "backends/kernel.h"
#include "core/random.h"
#include "ir/op_registry.h"

namespace trident::test_support {

class GraphRunner {
 public:
  GraphRunner(const ir::Graph& g, const std::string& backend) : g_(g), backend_(backend) {
    for (int v = 0; v < g.num_values(); ++v) storage_.emplace_back();
    root_.resize(g.num_values());
    for (int v = 0; v < g.num_values(); ++v) root_[v] = v;
    for (int nid : g.order()) {
      const ir::Node& n = g.node(nid);
      for (auto [o, i] : ir::OpRegistry::get(n.op).aliases(n)) root_[n.outputs[o]] = root_[n.inputs[i]];
    }
    for (int v = 0; v < g.num_values(); ++v)
      if (root_[v] == v)
        storage_[v].resize(static_cast<size_t>(numel(g.value(v).shape)) * dtype_size(g.value(v).dtype));
  }

  TensorView view(int v) {
    const ir::Value& val = g_.value(v);
    return {storage_[root_[v]].data(), val.shape, val.dtype};
  }

  // Fills every input, parameter and state value with random numbers from `seed`
  // (variances positive, labels in range).
  void randomize(uint64_t seed) {
    for (int v = 0; v < g_.num_values(); ++v) {
      const ir::Value& val = g_.value(v);
      if (val.role == ir::ValueRole::Activation) continue;
      Rng rng(seed ^ hash_name(val.name));
      TensorView t = view(v);
      const bool positive = val.name.find("var") != std::string::npos;
      for (int64_t i = 0; i < t.numel(); ++i) {
        double x = positive ? rng.uniform(0.5, 2.0) : rng.uniform(-1.0, 1.0);
        if (t.dtype == DType::f64) t.as<double>()[i] = x;
        else if (t.dtype == DType::f32) t.as<float>()[i] = static_cast<float>(x);
        else t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 3);
      }
    }
  }

  void copy_from(GraphRunner& other, int my_value, int their_value) {
    TensorView a = view(my_value), b = other.view(their_value);
    std::copy_n(static_cast<std::byte*>(b.data), b.bytes(), static_cast<std::byte*>(a.data));
  }

  void run() {
    for (int nid : g_.order()) {
      const ir::Node& n = g_.node(nid);
      KernelArgs args{n, {}, {}};
      for (int in : n.inputs) args.in.push_back(view(in));
      for (int out : n.outputs) args.out.push_back(view(out));
      KernelRegistry::make(backend_, n, g_)->run(args);
    }
  }

  std::vector<double> values(int v) {
    TensorView t = view(v);
    std::vector<double> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = t.dtype == DType::f64 ? t.as<double>()[i] : t.as<float>()[i];
    return out;
  }

 private:
  const ir::Graph& g_;
  std::string backend_;
  std::vector<std::vector<std::byte>> storage_;
  std::vector<int> root_;
};

}  // namespace trident::test_support
