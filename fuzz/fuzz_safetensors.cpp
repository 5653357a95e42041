// libFuzzer target for the safetensors reader: any bytes must be read or rejected with
// trident::Error (never a crash, leak or out-of-bounds access under AddressSanitizer), and
// whatever is accepted must survive encode → read unchanged. Build and run: fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "runtime/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::runtime;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    Metadata md;
    const WeightMap w = read_safetensors_from_memory(bytes, "fuzz-input", &md);
    const WeightMap again = read_safetensors_from_memory(encode_safetensors(w, md), "re-encoded");
    if (again.size() != w.size()) std::abort();
    for (const auto& [name, t] : w) {
      auto it = again.find(name);
      if (it == again.end() || it->second.data != t.data || it->second.shape != t.shape ||
          it->second.dtype != t.dtype)
        std::abort();
    }
  } catch (const trident::Error&) {
    // A clean rejection is a correct outcome.
  }
  return 0;
}
