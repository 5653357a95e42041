// The kept blocks of nvjpeg_memory.h. A device block is handed out again with its new stream
// told to wait for the event recorded where it was freed (the device orders the two, the host
// does not wait); a page-locked block only once that event has passed, since nvJPEG writes it
// from the host. A block serves a request of at least half its size, so a small request does
// not hold a large block.
#if TRIDENT_HAVE_NVJPEG_HEADER
#include "backends/cuda/images/nvjpeg_memory.h"

#include <cuda_runtime.h>

namespace trident::cuda {

NvjpegMemory::NvjpegMemory() {
  pinned_kept_.pinned = true;
  device_.dev_malloc = &NvjpegMemory::device_malloc;
  device_.dev_free = &NvjpegMemory::device_free;
  device_.dev_ctx = this;
  pinned_.pinned_malloc = &NvjpegMemory::pinned_malloc;
  pinned_.pinned_free = &NvjpegMemory::pinned_free;
  pinned_.pinned_ctx = this;
}

NvjpegMemory::~NvjpegMemory() {
  for (Kept* k : {&device_kept_, &pinned_kept_}) {
    for (const Block& b : k->blocks) release(*k, b);
    for (const auto& [p, size] : k->in_use) release(*k, Block{p, size, nullptr});
  }
}

void NvjpegMemory::release(const Kept& kept, const Block& b) {
  if (b.freed) cudaEventDestroy(static_cast<cudaEvent_t>(b.freed));
  if (kept.pinned)
    cudaFreeHost(b.p);
  else
    cudaFree(b.p);
}

int NvjpegMemory::take(Kept& kept, void** ptr, size_t size, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t best = kept.blocks.size();
  for (size_t i = 0; i < kept.blocks.size(); ++i) {
    const size_t s = kept.blocks[i].size;
    if (s >= size && s / 2 <= size && (best == kept.blocks.size() || s < kept.blocks[best].size)) best = i;
  }
  if (best < kept.blocks.size()) {
    const Block b = kept.blocks[best];
    kept.blocks.erase(kept.blocks.begin() + static_cast<std::ptrdiff_t>(best));
    kept.bytes -= b.size;
    const auto freed = static_cast<cudaEvent_t>(b.freed);
    const cudaError_t e = kept.pinned ? cudaEventSynchronize(freed)
                                      : cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), freed, 0);
    cudaEventDestroy(freed);
    if (e != cudaSuccess) {
      cudaGetLastError();
      release(kept, Block{b.p, b.size, nullptr});
    } else {
      kept.in_use[b.p] = b.size;
      *ptr = b.p;
      return 0;
    }
  }
  const size_t bytes = size ? size : 1;
  cudaError_t e = kept.pinned ? cudaHostAlloc(ptr, bytes, cudaHostAllocDefault) : cudaMalloc(ptr, bytes);
  if (e != cudaSuccess && !kept.blocks.empty()) {  // memory kept but too small: give it back, try again
    cudaGetLastError();
    for (const Block& b : kept.blocks) release(kept, b);
    kept.blocks.clear();
    kept.bytes = 0;
    e = kept.pinned ? cudaHostAlloc(ptr, bytes, cudaHostAllocDefault) : cudaMalloc(ptr, bytes);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    *ptr = nullptr;
    return 1;
  }
  kept.in_use[*ptr] = bytes;
  return 0;
}

int NvjpegMemory::give(Kept& kept, void* ptr, size_t size, void* stream) {
  if (ptr == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = kept.in_use.find(ptr);
  Block b{ptr, it != kept.in_use.end() ? it->second : size, nullptr};
  if (it != kept.in_use.end()) kept.in_use.erase(it);
  cudaEvent_t freed = nullptr;
  if (cudaEventCreateWithFlags(&freed, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(freed, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    cudaGetLastError();
    if (freed) cudaEventDestroy(freed);
    release(kept, b);  // cannot be kept safely: given back at once
    return 0;
  }
  b.freed = freed;
  kept.blocks.push_back(b);
  kept.bytes += b.size;
  while (kept.bytes > kKeptBytes && !kept.blocks.empty()) {  // the oldest first
    kept.bytes -= kept.blocks.front().size;
    release(kept, kept.blocks.front());
    kept.blocks.erase(kept.blocks.begin());
  }
  return 0;
}

int NvjpegMemory::device_malloc(void* self, void** ptr, size_t size, cudaStream_t stream) {
  auto* m = static_cast<NvjpegMemory*>(self);
  return m->take(m->device_kept_, ptr, size, stream);
}
int NvjpegMemory::device_free(void* self, void* ptr, size_t size, cudaStream_t stream) {
  auto* m = static_cast<NvjpegMemory*>(self);
  return m->give(m->device_kept_, ptr, size, stream);
}
int NvjpegMemory::pinned_malloc(void* self, void** ptr, size_t size, cudaStream_t stream) {
  auto* m = static_cast<NvjpegMemory*>(self);
  return m->take(m->pinned_kept_, ptr, size, stream);
}
int NvjpegMemory::pinned_free(void* self, void* ptr, size_t size, cudaStream_t stream) {
  auto* m = static_cast<NvjpegMemory*>(self);
  return m->give(m->pinned_kept_, ptr, size, stream);
}

}  // namespace trident::cuda
#endif  // TRIDENT_HAVE_NVJPEG_HEADER
