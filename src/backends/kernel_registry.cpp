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
std::once_flag g_once;
void ensure_builtins() {
  std::call_once(g_once, [] {
    register_cpu_ref_kernels();
#ifdef TRIDENT_HAVE_ONEDNN
    register_onednn_kernels();
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

void KernelRegistry::add(const std::string& backend, const std::string& op, KernelFactory f) {
  table()[backend][op] = std::move(f);
}

void KernelRegistry::add_fn(const std::string& backend, const std::string& op, KernelFn fn) {
  add(backend, op, [fn](const ir::Node&, const ir::Graph&) { return std::make_unique<FnKernel>(fn); });
}

std::unique_ptr<Kernel> KernelRegistry::make(const std::string& backend, const ir::Node& node,
                                             const ir::Graph& g) {
  ensure_builtins();
  auto b = table().find(backend);
  if (b == table().end()) throw Error("unknown backend '" + backend + "'");
  auto k = b->second.find(node.op);
  if (k == b->second.end())
    throw Error("backend '" + backend + "' has no kernel for op '" + node.op + "' (node '" +
                node.name + "')");
  return k->second(node, g);
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
