// The memory budget: size parsing, the available-memory probe (/proc/meminfo and the cgroup
// files, v1 and v2, every level from the process's own cgroup up to the root), and the claims.
#include "core/memory_budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace trident {

namespace {

constexpr uint64_t kMaxSize = uint64_t{1} << 60;

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::optional<uint64_t> read_number(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text) return std::nullopt;
  uint64_t v = 0;
  if (std::sscanf(text->c_str(), "%lu", &v) != 1) return std::nullopt;  // "max": no limit
  return v;
}

// The number after `key` on its line of a "key value [unit]" file (memory.stat, meminfo).
std::optional<uint64_t> stat_field(const std::string& path, const std::string& key) {
  const std::optional<std::string> text = read_text(path);
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line, k;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    uint64_t v = 0;
    if (in >> k >> v && k == key) return v;
  }
  return std::nullopt;
}

// What one cgroup directory's limit leaves free; nullopt when it has no limit.
std::optional<uint64_t> cgroup_headroom(const std::string& dir, bool v2) {
  const std::optional<uint64_t> limit = read_number(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  if (!limit || *limit >= kMaxSize) return std::nullopt;
  const uint64_t usage = read_number(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")).value_or(0);
  const uint64_t reclaimable = std::min(
      usage, stat_field(dir + "/memory.stat", v2 ? "inactive_file" : "total_inactive_file").value_or(0));
  const uint64_t used = usage - reclaimable;
  return *limit > used ? *limit - used : 0;
}

// The smallest headroom of the process's cgroup and its ancestors, for each hierarchy listed
// in /proc/self/cgroup that has the memory controller.
std::optional<uint64_t> cgroup_limit_headroom(const std::string& root) {
  const std::optional<std::string> text = read_text(root + "/proc/self/cgroup");
  if (!text) return std::nullopt;
  std::optional<uint64_t> best;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    const bool v1 = ("," + controllers + ",").find(",memory,") != std::string::npos;
    if (!v2 && !v1) continue;
    const std::string mount = root + (v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
    // From the cgroup itself up to the mount's root (in a container the path may not exist
    // below the mount; its root is then the container's own cgroup).
    while (true) {
      if (const std::optional<uint64_t> h = cgroup_headroom(mount + (path == "/" ? "" : path), v2))
        best = best ? std::min(*best, *h) : *h;
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

std::optional<uint64_t> parse_memory_size(std::string_view text) {
  size_t i = 0;
  uint64_t whole = 0;
  double fraction = 0, scale = 0.1;
  bool digits = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (whole > kMaxSize) return std::nullopt;
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    digits = true;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, scale /= 10) {
      fraction += scale * (text[i] - '0');
      digits = true;
    }
  }
  if (!digits) return std::nullopt;
  int power = 0;
  if (i < text.size()) {
    const char* units = "KMGT";
    const char* u = std::strchr(units, std::toupper(static_cast<unsigned char>(text[i])));
    if (u != nullptr && *u != '\0') {
      power = static_cast<int>(u - units) + 1;
      ++i;
      if (i < text.size() && text[i] == 'i') ++i;
    }
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  if (i != text.size()) return std::nullopt;
  const double bytes = (static_cast<double>(whole) + fraction) * std::pow(1024.0, power);
  if (!(bytes >= 1) || bytes > static_cast<double>(kMaxSize)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<AvailableMemory> available_host_memory(const std::string& root) {
  std::optional<AvailableMemory> out;
  if (const std::optional<uint64_t> kib = stat_field(root + "/proc/meminfo", "MemAvailable:"))
    out = AvailableMemory{*kib * 1024, "MemAvailable in /proc/meminfo"};
  if (const std::optional<uint64_t> h = cgroup_limit_headroom(root))
    if (!out || *h < out->bytes) out = AvailableMemory{*h, "what the cgroup's memory limit leaves"};
  return out;
}

MemoryBudget::MemoryBudget(uint64_t limit, std::string source, std::string advice)
    : limit_(limit), source_(std::move(source)), advice_(std::move(advice)) {}

MemoryBudget MemoryBudget::for_run(const std::string& max_memory, const std::string& advice) {
  if (!max_memory.empty()) {
    const std::optional<uint64_t> limit = parse_memory_size(max_memory);
    if (!limit)
      throw Error("--max-memory '" + max_memory + "' is not a size such as 512M, 8G or 1.5T");
    return MemoryBudget(*limit, "that --max-memory " + max_memory + " allows", advice);
  }
  const std::optional<AvailableMemory> avail = available_host_memory();
  if (!avail) return MemoryBudget();
  return MemoryBudget(avail->bytes, "available (" + avail->source + "; --max-memory sets the limit)", advice);
}

uint64_t MemoryBudget::headroom() const {
  if (!limit_) return UINT64_MAX;
  return *limit_ > claimed_ ? *limit_ - claimed_ : 0;
}

void MemoryBudget::check(uint64_t bytes, const std::string& what, const std::string& advice) const {
  if (!limit_ || (claimed_ <= *limit_ && bytes <= *limit_ - claimed_)) return;
  throw Error(what + " would take " + format_bytes(bytes) +
              (claimed_ ? " on top of the " + format_bytes(claimed_) + " already in use" : "") +
              ", more than the " + format_bytes(*limit_) + " " + source_ + "; " +
              (advice.empty() ? advice_ : advice));
}

void MemoryBudget::claim(uint64_t bytes, const std::string& what, const std::string& advice) {
  check(bytes, what, advice);
  claimed_ += bytes;
}

void MemoryBudget::check_device(uint64_t bytes, uint64_t free, const std::string& what) const {
  if (bytes <= free) return;
  throw Error(what + " would take " + format_bytes(bytes) + " of GPU memory, more than the " + format_bytes(free) + " free on the GPU; " + advice_);
}

}  // namespace trident
