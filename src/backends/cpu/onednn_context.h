// Process-wide oneDNN state of the "cpu" backend: one CPU engine, one in-order stream, and a
// cache of primitives keyed by their full signature, so identical layers share one primitive
// (primitives are stateless here: scratchpads are user-owned, so sharing is safe), and of the
// algorithm choices timed once per signature.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

namespace trident::cpu {

// Which of several ways to compute something timing preferred, with a line saying why.
struct TimedChoice {
  int index = 0;
  std::string note;
};

// A primitive together with the descriptor it was built from (for memory-desc queries).
struct CachedPrimitive {
  dnnl::primitive_desc_base pd;
  dnnl::primitive prim;
};

class OnednnContext {
 public:
  static OnednnContext& instance();

  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }

  // The primitive cached under `key`, or a new one built from make() and cached. `key` must
  // name everything the descriptor depends on (op kind, dims, layouts, attributes, dtype);
  // OpenMP's current thread count is added to it here.
  CachedPrimitive get(const std::string& key, const std::function<dnnl::primitive_desc_base()>& make);

  // The choice cached under `key`, or a new one from decide() (which may time primitives; it
  // runs without the lock held) cached for every later kernel with the same key.
  TimedChoice choice(const std::string& key, const std::function<TimedChoice()>& decide);
  // The choice cached under `key` in this process, if one was made.
  std::optional<TimedChoice> known_choice(const std::string& key) const;

  // `key` with OpenMP's current thread count, as both caches key on it (a primitive divides
  // its work for that count; a timing holds for one count).
  static std::string with_thread_count(const std::string& key);

  int64_t hits() const;
  int64_t misses() const;
  size_t size() const;

 private:
  OnednnContext();

  dnnl::engine engine_;
  dnnl::stream stream_;
  mutable std::mutex mu_;
  std::map<std::string, CachedPrimitive> cache_;
  std::map<std::string, TimedChoice> choices_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace trident::cpu
