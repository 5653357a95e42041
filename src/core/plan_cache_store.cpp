// The plan cache files of plan_cache_store.h: read once, merged and rewritten atomically.
#include "core/plan_cache_store.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <utility>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"

namespace trident {

PlanCacheStore::PlanCacheStore(std::string kind, std::string header)
    : kind_(std::move(kind)), header_(std::move(header)) {}

std::string PlanCacheStore::path(const std::string& dir, const std::string& machine) const {
  char name[32];
  std::snprintf(name, sizeof name, "-%08x.plans", crc32c(machine.data(), machine.size()));
  return dir + "/" + kind_ + name;
}

PlanChoices& PlanCacheStore::choices_of(const std::string& file, const std::string& machine) {
  auto it = read_.find(file);
  if (it != read_.end()) return it->second;
  std::string problem;
  PlanChoices c = read_plan_cache(file, header_, machine, problem);
  if (!problem.empty() && warned_.insert(file).second)
    std::cerr << "trident: the plan cache '" << file << "' is not used: " << problem
              << "; its choices are timed again and the file is rewritten\n";
  return read_.emplace(file, std::move(c)).first->second;
}

std::optional<PlanChoice> PlanCacheStore::find(const std::string& dir, const std::string& machine,
                                               const std::string& key) {
  if (dir.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  const PlanChoices& c = choices_of(path(dir, machine), machine);
  const auto it = c.find(key);
  if (it == c.end()) return std::nullopt;
  return it->second;
}

void PlanCacheStore::store(const std::string& dir, const std::string& machine, const std::string& key,
                           const PlanChoice& choice) {
  if (dir.empty() || !storable_plan_choice(key, choice)) return;
  const std::string file = path(dir, machine);
  std::lock_guard<std::mutex> lock(mu_);
  PlanChoices& mine = choices_of(file, machine);
  const auto known = mine.find(key);
  if (known != mine.end() && known->second.index == choice.index && known->second.note == choice.note) return;
  mine[key] = choice;
  // What other processes stored meanwhile stays; this process's choices win.
  std::string ignored;
  PlanChoices merged = read_plan_cache(file, header_, machine, ignored);
  for (const auto& [k, c] : mine) merged[k] = c;
  const std::string text = format_plan_cache(merged, header_, machine);
  if (text.size() > kMaxPlanCacheBytes) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    write_file_atomically(file, text.data(), text.size());
  } catch (const Error&) {
    // An unwritable cache costs the next compile its timing, nothing else.
  }
}

}  // namespace trident
