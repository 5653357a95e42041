// What a backend provides for one op: a Kernel made once per node at lowering time
// (where a fast backend builds its primitives) and run every step on bound tensors.
// Kernels are registered per (backend, op); a missing pair is a compile-time error that
// names both, never a silent fallback.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend_context.h"
#include "core/tensor_view.h"
#include "ir/graph.h"
#include "ops/backend_traits.h"

namespace trident {

struct KernelArgs {
  const ir::Node& node;
  std::vector<TensorView> in;   // one per node input, in order
  std::vector<TensorView> out;  // one per node output, in order
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(const KernelArgs& args) = 0;

  // Inference executables promise that parameters, state and hoisted results change only
  // between prepare() calls, so a kernel may transform its weights once there (oneDNN's
  // blocked weight layouts) instead of in every run().
  void set_constant_weights(bool on) { constant_weights_ = on; }
  virtual void prepare(const KernelArgs&) {}
  // How this kernel runs, where its backend chose between ways (e.g. one cuDNN graph, or a
  // convolution plus an element-wise kernel because cuDNN refused the fused graph); empty
  // when there is nothing to choose. `trident explain --device` lists these.
  virtual std::string implementation() const { return {}; }

 protected:
  bool constant_weights_ = false;
};

// Kernels are built once per node, with the context of the executable they will run in
// (a device backend builds its library plans against the context's handles and caches).
using KernelFactory =
    std::function<std::unique_ptr<Kernel>(const ir::Node&, const ir::Graph&, BackendContext&)>;
// A context is made with the run's backend options (the cuda backend picks its GPU by the
// world's local rank).
using ContextFactory = std::function<std::shared_ptr<BackendContext>(const BackendOptions&)>;
using KernelFn = std::function<void(const KernelArgs&)>;
// A stateless kernel running `fn` (what add_fn registers), for factories that choose.
std::unique_ptr<Kernel> make_fn_kernel(KernelFn fn);

class KernelRegistry {
 public:
  static void add(const std::string& backend, const std::string& op, KernelFactory factory);
  // Convenience for stateless kernels.
  static void add_fn(const std::string& backend, const std::string& op, KernelFn fn);
  // A backend whose kernels need more than host memory registers its context factory;
  // others get a plain BackendContext.
  static void add_context(const std::string& backend, ContextFactory factory);
  // A new context for `backend` (throws an Error saying why, e.g. when there is no GPU).
  static std::shared_ptr<BackendContext> make_context(const std::string& backend, const BackendOptions& options = {});
  // Throws Error("backend 'b' has no kernel for op 'o' (node 'n')") when missing.
  static std::unique_ptr<Kernel> make(const std::string& backend, const ir::Node& node,
                                      const ir::Graph& g, BackendContext& ctx);
  // For host backends in tests and tools: builds the kernel with a fresh context.
  static std::unique_ptr<Kernel> make(const std::string& backend, const ir::Node& node,
                                      const ir::Graph& g);
  static bool has(const std::string& backend, const std::string& op);
  static std::vector<std::string> backends();
  // What `backend` states to the compile pipeline (its traits.cpp); a name no backend declares
  // gets the defaults (decompositions only, no strategy).
  static const ops::BackendTraits& traits(const std::string& backend);
};

// The backend to run on when none is named: "cpu" where oneDNN is built, else "cpu_ref".
std::string default_backend();

// Each backend's traits (backends/<name>/traits.cpp): declared whether or not its kernels are
// built, so graphs for it can be compiled and checked on any machine.
ops::BackendTraits cpu_ref_traits();
ops::BackendTraits cpu_traits();
ops::BackendTraits cuda_traits();

// Each backend's registration entry point (called once, lazily, by KernelRegistry).
void register_cpu_ref_kernels();
#ifdef TRIDENT_HAVE_ONEDNN
void register_cpu_kernels();     // backend "cpu", on oneDNN (src/backends/cpu)
#endif
#ifdef TRIDENT_HAVE_CUDA
void register_cuda_kernels();    // backend "cuda" (src/backends/cuda)
#endif

}  // namespace trident
