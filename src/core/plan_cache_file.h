// The file format of a plan cache: the choices a backend timed when it compiled (which of
// several implementations each kernel runs), kept so the next compile on the same machine
// takes them untimed. Text, one choice a line:
//
//   <header>                         e.g. "trident cpu plans 1"
//   machine: <machine>               the machine and libraries the choices were timed on
//   <key> TAB <index> TAB <note>     the kernel's signature, the chosen candidate, why
//
// Parsing never trusts the file: a wrong header or machine line, a line that is not three
// fields, an index past kMaxPlanIndex, a file over kMaxPlanCacheBytes or one that is no regular
// file is reported as a problem (one sentence) and nothing of it is used.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace trident {

inline constexpr uint64_t kMaxPlanCacheBytes = uint64_t{16} << 20;
inline constexpr int kMaxPlanIndex = 64;

struct PlanChoice {
  int index = 0;
  std::string note;
};
using PlanChoices = std::map<std::string, PlanChoice>;

// The choices of `text`, for a file that starts with `header` and names `machine`; else none,
// and `problem` says why.
PlanChoices parse_plan_cache(const std::string& text, const std::string& header, const std::string& machine,
                             std::string& problem);

// The file's text for `choices`; those whose key or note would break a line are left out.
std::string format_plan_cache(const PlanChoices& choices, const std::string& header, const std::string& machine);

// Whether `key` and `choice` can be written as one line.
bool storable_plan_choice(const std::string& key, const PlanChoice& choice);

// parse_plan_cache of the file at `path` (through the checked opener, size capped); an absent
// file is no problem.
PlanChoices read_plan_cache(const std::string& path, const std::string& header, const std::string& machine,
                            std::string& problem);

}  // namespace trident
