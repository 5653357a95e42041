// A compiled plan that takes long to build (a cuDNN execution plan with its runtime-compiled
// kernels), kept on disk beside the plan cache so the next compile loads it instead of building
// it again, as TensorRT reloads a serialized engine. One file per plan,
// `<dir>/<kind>-<checksum of machine>.blobs/<checksum of key>.plan`:
//
//   trident plan blob 1
//   machine: <machine>               the machine and libraries the plan was built for
//   key: <key>                       the kernel's full signature
//   bytes: <n> crc32c: <8 hex>       the payload's size and checksum
//   <n bytes of payload>
//
// Parsing never trusts the file: a wrong header, machine or key, a size past kMaxPlanBlobBytes,
// a payload cut short, longer or with another checksum, or a path that is no regular file
// gives no payload and a sentence saying why. A file for another key (two keys with one
// checksum) or another machine is no problem: it is rebuilt and overwritten.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace trident {

inline constexpr uint64_t kMaxPlanBlobBytes = uint64_t{64} << 20;

// The payload of `file`'s text for `machine` and `key`; else none, and `problem` says why ("" when
// the file is only another machine's or another key's).
std::optional<std::string> parse_plan_blob(const std::string& file, const std::string& machine, const std::string& key,
                                           std::string& problem);

// The file's text for `payload`; "" when `machine` or `key` would break a line or the payload is
// too big.
std::string format_plan_blob(const std::string& machine, const std::string& key, const std::string& payload);

// Where `dir`'s blob for `kind`, `machine` and `key` lives.
std::string plan_blob_path(const std::string& dir, const std::string& kind, const std::string& machine,
                           const std::string& key);

// parse_plan_blob of the file at `path` through the checked opener, size capped; an absent file
// is no problem.
std::optional<std::string> read_plan_blob(const std::string& path, const std::string& machine, const std::string& key,
                                          std::string& problem);

// Writes the blob atomically, making its folder; an unwritable cache is no error (false).
bool write_plan_blob(const std::string& path, const std::string& machine, const std::string& key,
                     const std::string& payload);

}  // namespace trident
