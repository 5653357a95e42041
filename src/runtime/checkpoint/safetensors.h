// The safetensors weight format: an 8-byte little-endian header length, a JSON header naming
// every tensor's dtype, shape and byte range, then the raw data. Reading validates every field
// (a bad file is one Error naming it, never a crash or an allocation beyond its size); writing
// is atomic, so a crash or a failed write never leaves a broken file in place.
#pragma once
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/weights.h"

namespace trident::runtime {

using Metadata = std::map<std::string, std::string>;

// Largest JSON header accepted (the format's own reference reader uses the same bound).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// The metadata entry holding the CRC-32C of the data buffer (8 lowercase hex digits): written
// into every file trident writes, verified on reading wherever a file has it (files from
// elsewhere usually do not, and load without it). Readers do not return it with the metadata.
inline constexpr const char* kDataChecksumKey = "data_crc32c";
// The CRC-32C of the rest of the header: every tensor's name, dtype, shape and byte range and
// every other metadata entry (the data checksum's among them), so a renamed tensor or a removed
// or edited key is caught too.
inline constexpr const char* kHeaderChecksumKey = "header_crc32c";
// Every file trident writes says so: such a file, or a training checkpoint, without its
// checksums is damaged, not a file from elsewhere.
inline constexpr const char* kWriterKey = "writer";
inline constexpr const char* kWriterTrident = "trident";

// Reads every tensor of the file; `metadata`, when given, receives its "__metadata__" map.
// Supported dtypes: F32, F64, F16, BF16, I32. Throws trident::Error naming the file (and the
// tensor) for a missing, truncated or malformed file, data or a header that does not match the
// checksums its metadata records, or a file of trident's that lacks them; allocates at most the
// file's size.
WeightMap read_safetensors(const std::string& path, Metadata* metadata = nullptr);
// The same on bytes already in memory; `name` stands for the file in error messages.
WeightMap read_safetensors_from_memory(std::span<const std::byte> bytes, const std::string& name,
                                       Metadata* metadata = nullptr);

// The complete file contents for `weights` (tensors in name order, packed, header padded with
// spaces to a multiple of 8 bytes so the data is aligned), the writer and the data's and the
// header's checksums added to `metadata`.
std::vector<std::byte> encode_safetensors(const WeightMap& weights, const Metadata& metadata);
// Writes `path` atomically (core/atomic_file.h): on any failure an existing `path` is left
// untouched and an Error names the path and the cause.
void write_safetensors(const std::string& path, const WeightMap& weights, const Metadata& metadata);

}  // namespace trident::runtime
