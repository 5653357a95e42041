// The cpu backend's persisted choices (plan_cache.h): core/plan_cache_store.h's files, named and
// checked by this machine's oneDNN, instruction set and CPU.
#include "backends/cpu/plan_cache.h"

#include <fstream>
#include <sstream>

#include "core/plan_cache_store.h"

namespace trident::cpu {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  for (int i = 0; i < 64 && std::getline(in, line); ++i)
    if (line.rfind("model name", 0) == 0) {
      const size_t value = line.find_first_not_of(" \t:", line.find(':'));
      return value == std::string::npos ? "unknown" : line.substr(value);
    }
  return "unknown";
}

PlanCacheStore& store() {
  static PlanCacheStore s("cpu", "trident cpu plans 1");
  return s;
}

}  // namespace

std::string plan_cache_machine() {
  static const std::string machine = [] {
    const dnnl::version_t* v = dnnl::version();
    std::ostringstream s;
    s << "onednn " << v->major << "." << v->minor << "." << v->patch << "; isa "
      << static_cast<int>(dnnl::get_effective_cpu_isa()) << "; cpu " << cpu_model();
    return s.str();
  }();
  return machine;
}

std::string plan_cache_path(const std::string& dir) { return store().path(dir, plan_cache_machine()); }

std::optional<TimedChoice> cached_choice(const std::string& dir, const std::string& key) {
  const std::optional<PlanChoice> c = store().find(dir, plan_cache_machine(), key);
  if (!c) return std::nullopt;
  return TimedChoice{c->index, c->note};
}

void store_choice(const std::string& dir, const std::string& key, const TimedChoice& choice) {
  store().store(dir, plan_cache_machine(), key, PlanChoice{choice.index, choice.note});
}

}  // namespace trident::cpu
