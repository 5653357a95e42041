// Test support: runs the nodes of a graph, in order, on one backend, with one buffer per
// value (outputs that alias an input share its buffer, as the memory planner would make
// them). Lets a test compare a fused node with its decomposition without the pass pipeline.
// On a device backend (cuda) every value also has device memory: run() sends the host
// buffers there, runs the kernels and brings every value back, so tests read host memory.
// `misalign` > 0 places every device tensor that many elements past an aligned allocation,
// so kernels see pointers that are not 16-byte aligned (their scalar paths). With
// `share_aliases` false, outputs an op declares as aliases get their own buffers (the kernel
// must then copy); keep_kernels() + relocate() run the same kernel objects on new addresses.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "backends/kernel.h"
#include "core/half.h"
#include "core/random.h"
#include "ir/op_registry.h"

namespace trident::test_support {

class GraphRunner {
 public:
  GraphRunner(const ir::Graph& g, const std::string& backend, int64_t misalign = 0, bool share_aliases = true)
      : g_(g), backend_(backend), ctx_(KernelRegistry::make_context(backend)), misalign_(misalign) {
    for (int v = 0; v < g.num_values(); ++v) storage_.emplace_back();
    root_.resize(g.num_values());
    for (int v = 0; v < g.num_values(); ++v) root_[v] = v;
    for (int nid : g.order()) {
      const ir::Node& n = g.node(nid);
      if (share_aliases)
        for (auto [o, i] : ir::OpRegistry::get(n.op).aliases(n)) root_[n.outputs[o]] = root_[n.inputs[i]];
    }
    for (int v = 0; v < g.num_values(); ++v)
      if (root_[v] == v)
        storage_[v].resize(static_cast<size_t>(numel(g.value(v).shape)) * dtype_size(g.value(v).dtype));
    allocate_device();
  }
  ~GraphRunner() { free_device(); }
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  TensorView view(int v) {
    const ir::Value& val = g_.value(v);
    return {storage_[root_[v]].data(), val.shape, val.dtype};
  }

  // Fills every input, parameter and state value with random numbers from `seed`
  // (variances positive, labels in range, i32 values named "mask" with random bits).
  void randomize(uint64_t seed) {
    for (int v = 0; v < g_.num_values(); ++v) {
      const ir::Value& val = g_.value(v);
      if (val.role == ir::ValueRole::Activation) continue;
      Rng rng(seed ^ hash_name(val.name));
      TensorView t = view(v);
      const bool positive = val.name.find("var") != std::string::npos;
      if (t.dtype == DType::i32 && val.name.find("mask") != std::string::npos) {  // packed relu masks: any bits
        for (int64_t i = 0; i < t.numel(); ++i) t.as<uint32_t>()[i] = static_cast<uint32_t>(rng.next());
        continue;
      }
      for (int64_t i = 0; i < t.numel(); ++i) {
        double x = positive ? rng.uniform(0.5, 2.0) : rng.uniform(-1.0, 1.0);
        if (t.dtype == DType::f64) t.as<double>()[i] = x;
        else if (t.dtype == DType::f32) t.as<float>()[i] = static_cast<float>(x);
        else if (t.dtype == DType::f16) t.as<uint16_t>()[i] = float_to_half(static_cast<float>(x));
        else if (t.dtype == DType::bf16) t.as<uint16_t>()[i] = float_to_bf16(static_cast<float>(x));
        else t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 3);
      }
    }
  }

  void copy_from(GraphRunner& other, int my_value, int their_value) {
    TensorView a = view(my_value), b = other.view(their_value);
    std::copy_n(static_cast<std::byte*>(b.data), b.bytes(), static_cast<std::byte*>(a.data));
  }

  // From now on run() builds the kernels once and reuses them in later runs.
  void keep_kernels() { keep_kernels_ = true; }

  // Moves every buffer (host and device) to a new address, keeping the values: the next run
  // of kept kernels must rebind every data pointer.
  void relocate() {
    std::vector<std::vector<std::byte>> moved(storage_.begin(), storage_.end());  // allocated while the old live
    storage_.swap(moved);
    if (ctx_->on_device()) {
      std::vector<void*> old = std::move(device_);
      allocate_device();
      for (void* p : old)
        if (p) ctx_->free(p);
    }
  }

  // Runs every node once; `repeats` > 1 runs the whole graph again (cache and re-run checks).
  void run(int repeats = 1) {
    const bool dev = ctx_->on_device();
    // Device outputs start as NaN (all bits set), so an element a kernel forgets to write
    // fails the comparison instead of passing as the zero of fresh memory.
    if (dev)
      for (int v = 0; v < g_.num_values(); ++v) {
        if (root_[v] != v) continue;
        const bool produced = g_.value(v).role == ir::ValueRole::Activation && g_.value(v).dtype != DType::i32;
        const std::vector<std::byte> poison(produced ? storage_[v].size() : 0, std::byte{0xff});
        ctx_->copy_to_device(device_data(v), produced ? poison.data() : storage_[v].data(), storage_[v].size());
      }
    if (kernels_.empty())
      for (int nid : g_.order()) kernels_.push_back(KernelRegistry::make(backend_, g_.node(nid), g_, *ctx_));
    std::vector<KernelArgs> steps;
    for (int nid : g_.order()) {
      const ir::Node& n = g_.node(nid);
      KernelArgs args{n, {}, {}};
      for (int in : n.inputs) args.in.push_back(dev ? device_view(in) : view(in));
      for (int out : n.outputs) args.out.push_back(dev ? device_view(out) : view(out));
      steps.push_back(std::move(args));
    }
    for (int r = 0; r < repeats; ++r)
      for (size_t k = 0; k < steps.size(); ++k) kernels_[k]->run(steps[k]);
    ctx_->synchronize();
    if (!keep_kernels_) kernels_.clear();
    if (dev)
      for (int v = 0; v < g_.num_values(); ++v)
        if (root_[v] == v) ctx_->copy_to_host(storage_[v].data(), device_data(v), storage_[v].size());
  }

  BackendContext& context() { return *ctx_; }

  std::vector<double> values(int v) {
    TensorView t = view(v);
    std::vector<double> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      switch (t.dtype) {
        case DType::f64: out[i] = t.as<double>()[i]; break;
        case DType::f32: out[i] = t.as<float>()[i]; break;
        case DType::i32: out[i] = t.as<int32_t>()[i]; break;
        case DType::f16: out[i] = half_to_float(t.as<uint16_t>()[i]); break;
        case DType::bf16: out[i] = bf16_to_float(t.as<uint16_t>()[i]); break;
      }
    }
    return out;
  }

 private:
  // Bytes between root value v's allocation and its data.
  size_t device_offset(int v) const { return static_cast<size_t>(misalign_) * dtype_size(g_.value(v).dtype); }
  void* device_data(int v) { return static_cast<std::byte*>(device_[root_[v]]) + device_offset(root_[v]); }

  TensorView device_view(int v) {
    const ir::Value& val = g_.value(v);
    return {device_data(v), val.shape, val.dtype};
  }

  void allocate_device() {
    if (!ctx_->on_device()) return;
    device_.assign(g_.num_values(), nullptr);
    for (int v = 0; v < g_.num_values(); ++v)
      if (root_[v] == v) device_[v] = ctx_->allocate(storage_[v].size() + device_offset(v));
  }
  void free_device() {
    for (void* p : device_)
      if (p) ctx_->free(p);
    device_.clear();
  }

  const ir::Graph& g_;
  std::string backend_;
  std::shared_ptr<BackendContext> ctx_;
  std::vector<void*> device_;  // by root value, device backends only
  std::vector<std::vector<std::byte>> storage_;
  std::vector<int> root_;
  int64_t misalign_ = 0;  // elements between a device allocation and its tensor
  bool keep_kernels_ = false;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // in g_.order(): built by run(), kept between runs if asked
};

}  // namespace trident::test_support
