// The reference backend runs a fused node as its decomposition: OpDef::decompose builds the
// unfused nodes in a graph of their own, and the reference kernels of those nodes run in that
// order on the fused node's buffers. So the decomposition every fused kernel is tested against
// is written once, in the op's definition, and cpu_ref cannot drift from it. Each fused op is
// registered to this kernel by name (register.cpp); `implementation()` lists the nodes it runs.
// The cpu backend's deterministic mode and sync-BN run its fused nodes the same way, on its own kernels.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "ir/op_registry.h"

namespace trident::cpu_ref {

namespace {

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto* a0 = static_cast<const std::byte*>(a.data);
  const auto* b0 = static_cast<const std::byte*>(b.data);
  return a0 && b0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

class Decomposed final : public Kernel {
 public:
  Decomposed(const std::string& backend, const ir::Node& n, const ir::Graph& g, BackendContext& ctx) {
    const ir::OpDef& def = ir::OpRegistry::get(n.op);
    if (!def.decompose) throw Error("op '" + n.op + "' has no decomposition for cpu_ref to run");
    ir::Node fused = n;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::Value& v = g.value(n.inputs[i]);
      fused.inputs[i] = sub_.add_input(v.name, v.shape, v.dtype);
    }
    inputs_ = fused.inputs;
    fused.outputs.clear();
    results_ = def.decompose(sub_, fused);
    if (results_.size() < n.outputs.size())
      throw Error("the decomposition of '" + n.name + "' gives " + std::to_string(results_.size()) +
                  " values for " + std::to_string(n.outputs.size()) + " outputs");
    results_.resize(n.outputs.size());
    for (int id : sub_.order()) {
      const ir::Node& s = sub_.node(id);
      const std::string& on = KernelRegistry::has(backend, s.op) ? backend : std::string("cpu_ref");
      kernels_.push_back(KernelRegistry::make(on, s, sub_, ctx));
      description_ += (description_.empty() ? "decomposition: " : ", ") + s.op;
    }
    scratch_.resize(sub_.num_values());
  }

  void run(const KernelArgs& a) override {
    std::vector<void*> at(sub_.num_values(), nullptr);
    for (size_t i = 0; i < a.in.size(); ++i) at[inputs_[i]] = a.in[i].data;
    // A result is written straight into its output unless that output shares memory with an
    // input the decomposition may still read (a buffer the planner reuses), or another output
    // already takes that value.
    std::vector<int> direct(sub_.num_values(), -1);
    for (size_t j = 0; j < results_.size(); ++j) {
      const int v = results_[j];
      if (sub_.value(v).role == ir::ValueRole::Input || direct[v] >= 0) continue;
      const bool shared =
          std::any_of(a.in.begin(), a.in.end(), [&](const TensorView& in) { return overlaps(in, a.out[j]); });
      if (!shared) direct[v] = static_cast<int>(j);
    }
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const ir::Node& s = sub_.node(sub_.order()[k]);
      const auto aliases = ir::OpRegistry::get(s.op).aliases(s);
      for (size_t o = 0; o < s.outputs.size(); ++o) {
        const int v = s.outputs[o];
        const auto alias =
            std::find_if(aliases.begin(), aliases.end(), [&](auto p) { return p.first == static_cast<int>(o); });
        if (alias != aliases.end()) at[v] = at[s.inputs[alias->second]];
        else if (direct[v] >= 0) at[v] = a.out[direct[v]].data;
        else at[v] = scratch(v);
      }
      KernelArgs sub{s, {}, {}};
      for (int v : s.inputs) sub.in.push_back(view(v, at));
      for (int v : s.outputs) sub.out.push_back(view(v, at));
      kernels_[k]->run(sub);
    }
    for (size_t j = 0; j < results_.size(); ++j) {
      const TensorView from = view(results_[j], at);
      if (from.data != a.out[j].data) std::memcpy(a.out[j].data, from.data, a.out[j].bytes());
    }
  }

  std::string implementation() const override { return description_; }

 private:
  TensorView view(int v, const std::vector<void*>& at) const {
    return {at[v], sub_.value(v).shape, sub_.value(v).dtype};
  }
  void* scratch(int v) {
    const ir::Value& value = sub_.value(v);
    scratch_[v].resize(static_cast<size_t>(numel(value.shape)) * dtype_size(value.dtype));
    return scratch_[v].data();
  }

  ir::Graph sub_;
  std::vector<int> inputs_;   // per input of the fused node, its value in sub_
  std::vector<int> results_;  // per output of the fused node, the value computing it
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::vector<std::byte>> scratch_;
  std::string description_;
};

}  // namespace

std::unique_ptr<Kernel> make_decomposed(const ir::Node& n, const ir::Graph& g, BackendContext& ctx) {
  return std::make_unique<Decomposed>("cpu_ref", n, g, ctx);
}

std::unique_ptr<Kernel> make_decomposed_on(const std::string& backend, const ir::Node& n, const ir::Graph& g,
                                           BackendContext& ctx) {
  return std::make_unique<Decomposed>(backend, n, g, ctx);
}

}  // namespace trident::cpu_ref
