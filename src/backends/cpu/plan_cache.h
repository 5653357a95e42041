// Timed choices that outlive the process. The cpu backend times oneDNN's implementations of
// each inference convolution (conv_algorithms.h), which costs most of a compile; this file
// keeps the choices in `<dir>/cpu-<machine>.plans`, so the next compile of the same shapes on
// the same machine takes them instead of timing again, as TensorRT keeps a timing cache.
//
// The file is one per machine and library (its name has a checksum of oneDNN's version, the
// instruction set it runs and the CPU's model, and its second line names them), so machines
// sharing a home folder keep their own choices. A file whose line names another, or
// one that is not a plan cache at all (corrupt, cut short, a FIFO or a device in its place), is
// not used: one sentence on stderr says so, and the next choice made rewrites it. Reads go
// through the checked opener with a size cap; writes are atomic (a temporary file renamed over
// it), so processes sharing a cache never read half a file. A cache that cannot be written is
// no error: it only makes the next compile slower. The format and its checks are
// core/plan_cache_file.h's.
#pragma once
#include <optional>
#include <string>

#include "backends/cpu/onednn_context.h"

namespace trident::cpu {

// The choice `dir`'s cache holds under `key`, if any ("" dir: none).
std::optional<TimedChoice> cached_choice(const std::string& dir, const std::string& key);

// Adds `choice` under `key` to `dir`'s cache, made if missing, keeping what other processes
// added meanwhile; a key or note with a tab or a line break is not stored.
void store_choice(const std::string& dir, const std::string& key, const TimedChoice& choice);

// The file of `dir`'s cache for this machine and library.
std::string plan_cache_path(const std::string& dir);

// The machine and library line the cache records, e.g. "onednn 3.0.0; isa 1567; cpu Intel(R) …".
std::string plan_cache_machine();

}  // namespace trident::cpu
