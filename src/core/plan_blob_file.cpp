// The plan blob files of plan_blob_file.h: a checked header, a checksummed payload.
#include "core/plan_blob_file.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/input_file.h"

namespace trident {
namespace {

constexpr const char* kHeader = "trident plan blob 1";

// The next line of `file` from `pos` (without its '\n'); false at the end of the text.
bool next_line(const std::string& file, size_t& pos, std::string& line) {
  const size_t end = file.find('\n', pos);
  if (end == std::string::npos) return false;
  line = file.substr(pos, end - pos);
  pos = end + 1;
  return true;
}

bool one_line(const std::string& s) { return !s.empty() && s.find_first_of("\n\r") == std::string::npos; }

std::string checksum_text(uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

// "bytes: <decimal digits> crc32c: <8 lowercase hex digits>", nothing else.
bool parse_size_line(const std::string& line, uint64_t& bytes, std::string& crc) {
  const std::string head = "bytes: ", middle = " crc32c: ";
  if (line.rfind(head, 0) != 0) return false;
  size_t pos = head.size();
  const size_t digits_start = pos;
  bytes = 0;
  while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9' && pos - digits_start < 12)
    bytes = bytes * 10 + static_cast<uint64_t>(line[pos++] - '0');
  if (pos == digits_start || line.compare(pos, middle.size(), middle) != 0) return false;
  crc = line.substr(pos + middle.size());
  return crc.size() == 8 && crc.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::optional<std::string> parse_plan_blob(const std::string& file, const std::string& machine, const std::string& key,
                                           std::string& problem) {
  problem.clear();
  size_t pos = 0;
  std::string header, machine_line, key_line, size_line;
  if (!next_line(file, pos, header) || header != kHeader) {
    problem = "it does not start with \"" + std::string(kHeader) + "\"";
    return std::nullopt;
  }
  if (!next_line(file, pos, machine_line) || !next_line(file, pos, key_line) || !next_line(file, pos, size_line)) {
    problem = "its header is cut short";
    return std::nullopt;
  }
  if (machine_line != "machine: " + machine || key_line != "key: " + key) return std::nullopt;
  uint64_t bytes = 0;
  std::string crc;
  if (!parse_size_line(size_line, bytes, crc)) {
    problem = "its size line is not \"bytes: <n> crc32c: <8 hex digits>\"";
    return std::nullopt;
  }
  if (bytes > kMaxPlanBlobBytes || bytes != file.size() - pos) {
    problem = "it holds " + std::to_string(file.size() - pos) + " payload bytes where its header says " +
              std::to_string(bytes);
    return std::nullopt;
  }
  std::string payload = file.substr(pos);
  if (checksum_text(crc32c(payload.data(), payload.size())) != crc) {
    problem = "its payload does not match its checksum";
    return std::nullopt;
  }
  return payload;
}

std::string format_plan_blob(const std::string& machine, const std::string& key, const std::string& payload) {
  if (!one_line(machine) || !one_line(key) || payload.size() > kMaxPlanBlobBytes) return "";
  return std::string(kHeader) + "\nmachine: " + machine + "\nkey: " + key + "\nbytes: " +
         std::to_string(payload.size()) + " crc32c: " + checksum_text(crc32c(payload.data(), payload.size())) +
         "\n" + payload;
}

std::string plan_blob_path(const std::string& dir, const std::string& kind, const std::string& machine,
                           const std::string& key) {
  return dir + "/" + kind + "-" + checksum_text(crc32c(machine.data(), machine.size())) + ".blobs/" +
         checksum_text(crc32c(key.data(), key.size())) + ".plan";
}

std::optional<std::string> read_plan_blob(const std::string& path, const std::string& machine, const std::string& key,
                                          std::string& problem) {
  problem.clear();
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;  // absent: nothing built yet
  try {
    InputFile in(path, "plan blob");
    const uint64_t cap = kMaxPlanBlobBytes + 4096 + machine.size() + key.size();
    if (in.size() > cap) {
      problem = "it is " + std::to_string(in.size()) + " bytes, more than a plan blob may be";
      return std::nullopt;
    }
    return parse_plan_blob(in.read_all(), machine, key, problem);
  } catch (const Error& e) {
    problem = e.what();
    return std::nullopt;
  }
}

bool write_plan_blob(const std::string& path, const std::string& machine, const std::string& key,
                     const std::string& payload) {
  const std::string text = format_plan_blob(machine, key, payload);
  if (text.empty()) return false;
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    write_file_atomically(path, text.data(), text.size());
    return true;
  } catch (const Error&) {
    return false;  // an unwritable cache costs the next compile its build, nothing else
  }
}

}  // namespace trident
