// How much memory a run may use and how much it has claimed: the limit is --max-memory, or what
// the machine and the process's cgroup leave available when the run starts. Readers and the
// compiler claim what they are about to allocate, so a run that cannot fit is refused with one
// sentence naming the size and what to lower, instead of being killed by the kernel later.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace trident {

// "8G" is 8 GiB: digits with an optional fraction, then an optional K, M, G or T (powers of
// 1024, either case, optionally followed by "B" or "iB"); no suffix means bytes. nullopt for
// anything else, for zero and for more than 2^60 bytes.
std::optional<uint64_t> parse_memory_size(std::string_view text);

// "22.9 GiB", "640.0 KiB", "12 bytes".
std::string format_bytes(uint64_t bytes);

// Host memory this process may still allocate, and where that figure comes from.
struct AvailableMemory {
  uint64_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "the cgroup's memory limit"
};
// MemAvailable from /proc/meminfo, lowered to what the process's cgroup limit leaves (v2
// memory.max, v1 memory.limit_in_bytes, minus the usage that cannot be reclaimed). `root`
// prefixes /proc and /sys (tests point it at a fake tree). nullopt when nothing can be read.
std::optional<AvailableMemory> available_host_memory(const std::string& root = "");

class MemoryBudget {
 public:
  // No limit: claims are counted and nothing is refused.
  MemoryBudget() = default;
  // At most `limit` bytes. `source` completes "more than the 8.0 GiB ..." in messages, e.g.
  // "that --max-memory 8G allows"; `advice` is what a refused claim suggests by default.
  MemoryBudget(uint64_t limit, std::string source, std::string advice);
  // The command-line budget: `max_memory` (a --max-memory value) when it is not empty, else
  // the host memory available now; no limit where that cannot be read.
  static MemoryBudget for_run(const std::string& max_memory, const std::string& advice);

  // Counts `bytes` that `what` is about to allocate ("the training graph's buffers"); throws
  // trident::Error naming both sizes, the limit and `advice` when they do not fit.
  void claim(uint64_t bytes, const std::string& what, const std::string& advice = {});
  // Like claim() for a transient peak: checked, not counted.
  void check(uint64_t bytes, const std::string& what, const std::string& advice = {}) const;
  // The device-memory counterpart: `bytes` must fit in the `free` bytes the device reports.
  void check_device(uint64_t bytes, uint64_t free, const std::string& what) const;

  uint64_t claimed() const { return claimed_; }
  // What is left to claim (UINT64_MAX without a limit).
  uint64_t headroom() const;
  std::optional<uint64_t> limit() const { return limit_; }
  const std::string& advice() const { return advice_; }

 private:
  std::optional<uint64_t> limit_;
  std::string source_, advice_;
  uint64_t claimed_ = 0;
};

}  // namespace trident
