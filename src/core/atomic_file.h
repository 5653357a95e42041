// Writing a file so that a crash or a failed write never leaves a partial or damaged file:
// the bytes go to a temporary file beside the target, are flushed to disk, then renamed over
// it. Every file trident writes (checkpoints, .npy outputs, explain's pictures) goes through here.
#pragma once
#include <cstddef>
#include <string>

namespace trident {

// Throws trident::Error naming `path` and the failing step; an existing file stays intact.
void write_file_atomically(const std::string& path, const void* data, size_t size);

// Checks now what write_file_atomically would find later: that `path` is absent or a regular
// file, and that a temporary file can be created beside it (made and removed again), so a
// run that writes at its end learns at its start that it cannot. Throws the same Errors.
void check_writable(const std::string& path);

}  // namespace trident
