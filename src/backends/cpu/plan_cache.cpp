// The cpu backend's persisted choices (plan_cache.h) in the format of core/plan_cache_file.h,
// read whole once per process and directory, and rewritten whole when a choice is added.
#include "backends/cpu/plan_cache.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/plan_cache_file.h"

namespace trident::cpu {

namespace {

constexpr const char* kHeader = "trident cpu plans 1";

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

std::string file_of(const std::string& dir) { return plan_cache_path(dir); }

// What this process has read of each directory's cache, and the directories it has warned of.
struct Memory {
  std::mutex mu;
  std::map<std::string, PlanChoices> read;
  std::set<std::string> warned;
};

Memory& memory() {
  static Memory m;
  return m;
}

// `dir`'s choices, read on first use (the caller holds the lock).
PlanChoices& choices_of(const std::string& dir) {
  Memory& m = memory();
  auto it = m.read.find(dir);
  if (it != m.read.end()) return it->second;
  std::string problem;
  PlanChoices c = read_plan_cache(file_of(dir), kHeader, plan_cache_machine(), problem);
  if (!problem.empty() && m.warned.insert(dir).second)
    std::cerr << "trident: the plan cache '" << file_of(dir) << "' is not used: " << problem
              << "; its choices are timed again and the file is rewritten\n";
  return m.read.emplace(dir, std::move(c)).first->second;
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

std::string plan_cache_path(const std::string& dir) {
  const std::string machine = plan_cache_machine();
  char name[32];
  std::snprintf(name, sizeof name, "/cpu-%08x.plans", crc32c(machine.data(), machine.size()));
  return dir + name;
}

std::optional<TimedChoice> cached_choice(const std::string& dir, const std::string& key) {
  if (dir.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(memory().mu);
  const PlanChoices& c = choices_of(dir);
  const auto it = c.find(key);
  if (it == c.end()) return std::nullopt;
  return TimedChoice{it->second.index, it->second.note};
}

void store_choice(const std::string& dir, const std::string& key, const TimedChoice& choice) {
  const PlanChoice entry{choice.index, choice.note};
  if (dir.empty() || !storable_plan_choice(key, entry)) return;
  std::lock_guard<std::mutex> lock(memory().mu);
  PlanChoices& mine = choices_of(dir);
  const auto known = mine.find(key);
  if (known != mine.end() && known->second.index == entry.index && known->second.note == entry.note) return;
  mine[key] = entry;
  // What other processes stored meanwhile stays; this process's choices win.
  std::string ignored;
  PlanChoices merged = read_plan_cache(file_of(dir), kHeader, plan_cache_machine(), ignored);
  for (const auto& [k, c] : mine) merged[k] = c;
  const std::string text = format_plan_cache(merged, kHeader, plan_cache_machine());
  if (text.size() > kMaxPlanCacheBytes) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    write_file_atomically(file_of(dir), text.data(), text.size());
  } catch (const Error&) {
    // An unwritable cache costs the next compile its timing, nothing else.
  }
}

}  // namespace trident::cpu
