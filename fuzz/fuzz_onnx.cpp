// libFuzzer entry for the ONNX reader: any byte string must import or throw trident::Error,
// never crash, hang or allocate without bound (tests/frontend/onnx_import_test.cpp runs a
// bounded deterministic smoke version of this on every ctest run).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    trident::frontend::import_onnx_from_memory(data, size, {}, "fuzz input");
  } catch (const trident::Error&) {
  }
  return 0;
}
