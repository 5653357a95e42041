// A backend's plan cache on disk (the format of plan_cache_file.h), shared by the backends that
// time their choices: the cpu backend's oneDNN algorithms and the cuda backend's cuDNN plans.
// One file per directory, backend kind and machine — `<dir>/<kind>-<checksum of machine>.plans`
// — so machines and GPUs that share a home folder keep their own. A file is read once per
// process and rewritten whole, atomically, when a choice is added, keeping what other processes
// added meanwhile. A file that is not a plan cache for this machine (corrupt, cut short, a FIFO,
// another machine's) is not used: one sentence on stderr says so, and the next choice rewrites
// it. An unwritable cache is no error: it only makes the next compile slower.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "core/plan_cache_file.h"

namespace trident {

class PlanCacheStore {
 public:
  // `kind` names the file ("cpu", "cuda"); `header` is its first line.
  PlanCacheStore(std::string kind, std::string header);

  // The choice `dir`'s cache for `machine` holds under `key` ("" dir: none).
  std::optional<PlanChoice> find(const std::string& dir, const std::string& machine, const std::string& key);
  // Adds `choice` under `key`, made if missing; a key or note with a tab or a line break, or an
  // index past kMaxPlanIndex, is not stored.
  void store(const std::string& dir, const std::string& machine, const std::string& key, const PlanChoice& choice);
  // The file of `dir`'s cache for `machine`.
  std::string path(const std::string& dir, const std::string& machine) const;

 private:
  // The choices of the file at `file` (the caller holds the lock), read on first use.
  PlanChoices& choices_of(const std::string& file, const std::string& machine);

  const std::string kind_, header_;
  std::mutex mu_;
  std::map<std::string, PlanChoices> read_;  // by file
  std::set<std::string> warned_;             // files said to be unusable
};

}  // namespace trident
