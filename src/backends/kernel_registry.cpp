// The (backend, op) → kernel factory table.
#include <map>
#include <mutex>

#include "backends/kernel.h"
#include "core/error.h"

namespace trident {

namespace {
std::map<std::string, std::map<std::string, KernelFactory>>& table() {
  static std::map<std::string, std::map<std::string, KernelFactory>> t;
  return t;
}
std::map<std::string, ContextFactory>& contexts() {
  static std::map<std::string, ContextFactory> c;
  return c;
}
std::map<std::string, ops::BackendTraits>& traits_table() {
  static std::map<std::string, ops::BackendTraits> t;
  return t;
}
std::once_flag g_once;
void ensure_builtins() {
  std::call_once(g_once, [] {
    traits_table() = {{"cpu_ref", cpu_ref_traits()}, {"cpu", cpu_traits()}, {"cuda", cuda_traits()}};
    register_cpu_ref_kernels();
#ifdef TRIDENT_HAVE_ONEDNN
    register_cpu_kernels();
#endif
#ifdef TRIDENT_HAVE_CUDA
    register_cuda_kernels();
#endif
  });
}

class FnKernel final : public Kernel {
 public:
  explicit FnKernel(KernelFn fn) : fn_(std::move(fn)) {}
  void run(const KernelArgs& args) override { fn_(args); }

 private:
  KernelFn fn_;
};
}  // namespace

std::unique_ptr<Kernel> make_fn_kernel(KernelFn fn) { return std::make_unique<FnKernel>(std::move(fn)); }

void KernelRegistry::add(const std::string& backend, const std::string& op, KernelFactory f) {
  table()[backend][op] = std::move(f);
}

void KernelRegistry::add_fn(const std::string& backend, const std::string& op, KernelFn fn) {
  add(backend, op, [fn](const ir::Node&, const ir::Graph&, BackendContext&) { return make_fn_kernel(fn); });
}

const ops::BackendTraits& KernelRegistry::traits(const std::string& backend) {
  ensure_builtins();
  static const ops::BackendTraits undeclared;
  auto it = traits_table().find(backend);
  return it == traits_table().end() ? undeclared : it->second;
}

void KernelRegistry::add_context(const std::string& backend, ContextFactory factory) {
  contexts()[backend] = std::move(factory);
}

std::shared_ptr<BackendContext> KernelRegistry::make_context(const std::string& backend, const BackendOptions& options) {
  ensure_builtins();
  if (!table().count(backend)) throw Error("unknown backend '" + backend + "'");
  auto it = contexts().find(backend);
  return it == contexts().end() ? std::make_shared<BackendContext>() : it->second(options);
}

std::unique_ptr<Kernel> KernelRegistry::make(const std::string& backend, const ir::Node& node,
                                             const ir::Graph& g) {
  std::shared_ptr<BackendContext> ctx = make_context(backend);
  if (ctx->on_device())
    throw Error("backend '" + backend + "' keeps tensors on a device: build its kernels with the "
                "executable's context");
  return make(backend, node, g, *ctx);
}

std::unique_ptr<Kernel> KernelRegistry::make(const std::string& backend, const ir::Node& node,
                                             const ir::Graph& g, BackendContext& ctx) {
  ensure_builtins();
  auto b = table().find(backend);
  if (b == table().end()) throw Error("unknown backend '" + backend + "'");
  auto k = b->second.find(node.op);
  if (k == b->second.end())
    throw Error("backend '" + backend + "' has no kernel for op '" + node.op + "' (node '" +
                node.name + "')");
  return k->second(node, g, ctx);
}

bool KernelRegistry::has(const std::string& backend, const std::string& op) {
  ensure_builtins();
  auto b = table().find(backend);
  return b != table().end() && b->second.count(op) != 0;
}

std::string default_backend() {
#ifdef TRIDENT_HAVE_ONEDNN
  return "cpu";
#else
  return "cpu_ref";
#endif
}

std::vector<std::string> KernelRegistry::backends() {
  ensure_builtins();
  std::vector<std::string> out;
  for (const auto& [k, v] : table()) out.push_back(k);
  return out;
}

}  // namespace trident
