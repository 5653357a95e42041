// libFuzzer target for the .npy reader (`trident infer --input x.npy`): any bytes must be read
// or rejected with trident::Error, and an accepted array must survive npy_bytes → parse_npy
// unchanged. Seeds: corpus/npy (fuzz/make_corpus.py), tokens: npy.dict; see README.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::runtime;
  try {
    const HostTensor t = parse_npy(data, size, "fuzz input");
    const std::string again = npy_bytes(t);
    const HostTensor back = parse_npy(again.data(), again.size(), "re-encoded");
    if (back.shape != t.shape || back.dtype != t.dtype || back.data != t.data) std::abort();
  } catch (const trident::Error&) {
    // A clean rejection is a correct outcome.
  }
  return 0;
}
