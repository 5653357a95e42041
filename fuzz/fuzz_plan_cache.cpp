// libFuzzer target for the plan cache readers (core/plan_cache_file.h, core/plan_blob_file.h):
// any bytes parse to choices or a payload, or to one problem sentence, never a crash; and what
// parses, written again and read back, gives the same choices or payload.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/plan_blob_file.h"
#include "core/plan_cache_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string header = "trident cpu plans 1", machine = "onednn 3.0.0; isa 1; cpu fuzz";
  std::string problem;
  const trident::PlanChoices choices = trident::parse_plan_cache(text, header, machine, problem);
  if (!problem.empty() && !choices.empty()) std::abort();  // a refused file yields nothing
  trident::PlanChoices storable;
  for (const auto& [key, c] : choices)
    if (trident::storable_plan_choice(key, c)) storable[key] = c;
  std::string again;
  const trident::PlanChoices back =
      trident::parse_plan_cache(trident::format_plan_cache(storable, header, machine), header, machine, again);
  if (!again.empty() || back.size() != storable.size()) std::abort();
  for (const auto& [key, c] : storable) {
    const auto it = back.find(key);
    if (it == back.end() || it->second.index != c.index || it->second.note != c.note) std::abort();
  }
  const std::string blob_key = "conv|fuzz";
  const std::optional<std::string> payload = trident::parse_plan_blob(text, machine, blob_key, problem);
  if (payload && !problem.empty()) std::abort();
  if (payload) {
    const std::string written = trident::format_plan_blob(machine, blob_key, *payload);
    const std::optional<std::string> back_payload = trident::parse_plan_blob(written, machine, blob_key, again);
    if (!back_payload || *back_payload != *payload) std::abort();
  }
  return 0;
}
