// Opens libnvjpeg.so.13 once with dlopen and resolves the entry points of nvjpeg_library.h.
#if TRIDENT_HAVE_NVJPEG_HEADER
#include "backends/cuda/images/nvjpeg_library.h"

#include <dlfcn.h>

#include <mutex>

namespace trident::cuda {
namespace {

struct Loaded {
  NvjpegLibrary lib;
  std::string failure;  // empty when lib is usable
};

template <typename F>
bool resolve(void* handle, const char* name, F* out, std::string* failure) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr) *failure = std::string("libnvjpeg has no ") + name;
  return *out != nullptr;
}

Loaded open_library() {
  Loaded l;
  // Never closed: the process may decode until it exits.
  void* h = dlopen("libnvjpeg.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    l.failure = std::string("libnvjpeg.so.13 cannot be opened (") + (e ? e : "not found") +
                "); put the CUDA toolkit's lib64 on the library path";
    return l;
  }
  NvjpegLibrary& n = l.lib;
  const bool ok = resolve(h, "nvjpegGetProperty", &n.get_property, &l.failure) &&
                  resolve(h, "nvjpegCreateExV2", &n.create_ex_v2, &l.failure) &&
                  resolve(h, "nvjpegDestroy", &n.destroy, &l.failure) &&
                  resolve(h, "nvjpegJpegStateCreate", &n.state_create, &l.failure) &&
                  resolve(h, "nvjpegJpegStateDestroy", &n.state_destroy, &l.failure) &&
                  resolve(h, "nvjpegDecodeBatchedInitialize", &n.batched_initialize, &l.failure) &&
                  resolve(h, "nvjpegDecodeBatched", &n.decode_batched, &l.failure) &&
                  resolve(h, "nvjpegDecodeBatchedPreAllocate", &n.batched_pre_allocate, &l.failure) &&
                  resolve(h, "nvjpegDecode", &n.decode, &l.failure);
  if (!ok) return l;
  std::string optional;  // a missing region entry point only turns region decoding off
  resolve(h, "nvjpegDecodeParamsCreate", &n.params_create, &optional);
  resolve(h, "nvjpegDecodeParamsDestroy", &n.params_destroy, &optional);
  resolve(h, "nvjpegDecodeParamsSetOutputFormat", &n.params_set_output_format, &optional);
  resolve(h, "nvjpegDecodeParamsSetROI", &n.params_set_roi, &optional);
  resolve(h, "nvjpegDecodeBatchedEx", &n.decode_batched_ex, &optional);
  int major = 0, minor = 0, patch = 0;
  n.get_property(MAJOR_VERSION, &major);
  n.get_property(MINOR_VERSION, &minor);
  n.get_property(PATCH_LEVEL, &patch);
  n.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  return l;
}

}  // namespace

const NvjpegLibrary* nvjpeg_library(std::string* why) {
  static const Loaded loaded = open_library();
  if (!loaded.failure.empty()) {
    if (why) *why = loaded.failure;
    return nullptr;
  }
  return &loaded.lib;
}

const char* nvjpeg_status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocator failure";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "implementation not supported";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "incomplete bitstream";
    default: return "unknown status";
  }
}

}  // namespace trident::cuda
#endif  // TRIDENT_HAVE_NVJPEG_HEADER
