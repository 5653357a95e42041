// Reading and writing the plan cache format of plan_cache_file.h.
#include "core/plan_cache_file.h"

#include <sys/stat.h>

#include <sstream>

#include "core/error.h"
#include "core/input_file.h"

namespace trident {

PlanChoices parse_plan_cache(const std::string& text, const std::string& header, const std::string& machine,
                             std::string& problem) {
  PlanChoices out;
  if (text.size() > kMaxPlanCacheBytes) {
    problem = "it is larger than a plan cache grows (" + std::to_string(text.size()) + " bytes)";
    return out;
  }
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != header) {
    problem = "it does not start with the line '" + header + "'";
    return out;
  }
  if (!std::getline(in, line) || line != "machine: " + machine) {
    problem = "it was timed on another machine or library (" + line.substr(0, 200) + ")";
    return out;
  }
  for (int number = 3; std::getline(in, line); ++number) {
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    int index = -1;
    if (b != std::string::npos) {
      const std::string digits = line.substr(a + 1, b - a - 1);
      if (!digits.empty() && digits.size() <= 2 && digits.find_first_not_of("0123456789") == std::string::npos)
        index = std::stoi(digits);
    }
    if (a == 0 || b == std::string::npos || index < 0 || index > kMaxPlanIndex ||
        line.find('\t', b + 1) != std::string::npos) {
      problem = "line " + std::to_string(number) + " is not 'key TAB index TAB note'";
      out.clear();
      return out;
    }
    out[line.substr(0, a)] = {index, line.substr(b + 1)};
  }
  return out;
}

bool storable_plan_choice(const std::string& key, const PlanChoice& choice) {
  return !key.empty() && key.find_first_of("\t\n\r") == std::string::npos &&
         choice.note.find_first_of("\t\n\r") == std::string::npos && choice.index >= 0 &&
         choice.index <= kMaxPlanIndex;
}

std::string format_plan_cache(const PlanChoices& choices, const std::string& header, const std::string& machine) {
  std::string text = header + "\nmachine: " + machine + "\n";
  for (const auto& [key, c] : choices)
    if (storable_plan_choice(key, c)) text += key + "\t" + std::to_string(c.index) + "\t" + c.note + "\n";
  return text;
}

PlanChoices read_plan_cache(const std::string& path, const std::string& header, const std::string& machine,
                            std::string& problem) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return {};  // absent: nothing cached yet
  std::string text;
  try {
    const InputFile file(path, "plan cache");
    if (file.size() > kMaxPlanCacheBytes) {
      problem = "it is larger than a plan cache grows (" + std::to_string(file.size()) + " bytes)";
      return {};
    }
    text = file.read_all();
  } catch (const Error& e) {
    problem = e.what();
    return {};
  }
  return parse_plan_cache(text, header, machine, problem);
}

}  // namespace trident
