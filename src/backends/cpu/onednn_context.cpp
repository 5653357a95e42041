// The engine/stream singleton and the signature-keyed primitive cache of the "cpu" backend.
// Lookups and creation happen only while kernels are built (compile time), so one mutex
// around the whole get() is simpler than finer locking and costs nothing at run time.
#include "backends/cpu/onednn_context.h"

#include <omp.h>

namespace trident::cpu {

OnednnContext& OnednnContext::instance() {
  static OnednnContext ctx;
  return ctx;
}

OnednnContext::OnednnContext() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  // This cache is the one primitive cache; oneDNN's own (2.6) would hold a second copy of
  // every primitive, and walking a descriptor's list of implementations (conv_algorithms.cpp)
  // with it on lists entries twice once a primitive of that descriptor exists.
  dnnl::set_primitive_cache_capacity(0);
}

namespace {
// A primitive divides its work for the thread count it was built with (OpenMP's, at creation),
// and a timing holds for one count: both caches key on it as well.
std::string with_threads(const std::string& key) {
  return "threads=" + std::to_string(omp_get_max_threads()) + ";" + key;
}
}  // namespace

CachedPrimitive OnednnContext::get(const std::string& signature,
                                   const std::function<dnnl::primitive_desc_base()>& make) {
  const std::string key = with_threads(signature);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  dnnl::primitive_desc_base pd = make();
  CachedPrimitive entry{pd, dnnl::primitive(pd.get())};
  cache_.emplace(key, entry);
  return entry;
}

TimedChoice OnednnContext::choice(const std::string& signature,
                                  const std::function<TimedChoice()>& decide) {
  const std::string key = with_threads(signature);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = choices_.find(key);
    if (it != choices_.end()) return it->second;
  }
  TimedChoice c = decide();
  std::lock_guard<std::mutex> lock(mu_);
  return choices_.emplace(key, std::move(c)).first->second;
}

std::optional<TimedChoice> OnednnContext::known_choice(const std::string& signature) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = choices_.find(with_threads(signature));
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

std::string OnednnContext::with_thread_count(const std::string& key) { return with_threads(key); }

int64_t OnednnContext::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t OnednnContext::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

size_t OnednnContext::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace trident::cpu
