// Host memory for the CPU backends: 64-byte aligned, zero-filled, copied with memcpy.
#include "backends/backend_context.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace trident {

void* allocate_host(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of memory: cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return p;
}

void free_host(void* p) { std::free(p); }

void* BackendContext::allocate(size_t bytes) { return allocate_host(bytes); }

void BackendContext::free(void* p) { free_host(p); }

void BackendContext::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (dst != host_src && bytes) std::memmove(dst, host_src, bytes);
}

void BackendContext::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (host_dst != src && bytes) std::memmove(host_dst, src, bytes);
}

void BackendContext::copy_within(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes) std::memmove(dst, src, bytes);
}

}  // namespace trident
