// nvJPEG's device and page-locked memory, kept for reuse. The library's default allocators call
// cudaFree and cudaFreeHost whenever a batch needs other buffers, and both wait for the whole
// device — the training step running beside the decoding included — so a batch's decoding would
// wait for the step. Here a block nvJPEG frees is kept with an event marking where its stream
// stood, and handed out again for a request it fits once that point is passed; new blocks come
// from cudaMalloc / cudaHostAlloc. Blocks kept unused beyond kKeptBytes a kind are given back.
#pragma once
#include <nvjpeg.h>  // only where TRIDENT_HAVE_NVJPEG_HEADER (cmake/TridentCuda.cmake)

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace trident::cuda {

class NvjpegMemory {
 public:
  static constexpr size_t kKeptBytes = size_t{256} << 20;

  NvjpegMemory();
  // Frees every block: destroy the nvJPEG handles and states that use this memory first.
  ~NvjpegMemory();
  NvjpegMemory(const NvjpegMemory&) = delete;
  NvjpegMemory& operator=(const NvjpegMemory&) = delete;

  // For nvjpegCreateExV2; valid while this object lives.
  nvjpegDevAllocatorV2_t* device_allocator() { return &device_; }
  nvjpegPinnedAllocatorV2_t* pinned_allocator() { return &pinned_; }

 private:
  struct Block {
    void* p = nullptr;
    size_t size = 0;
    void* freed = nullptr;  // cudaEvent_t, recorded on the stream that freed the block
  };
  // One kind's blocks: those nvJPEG holds (by address: a reused block may be larger than the
  // request it serves) and those it has freed, kept.
  struct Kept {
    bool pinned = false;
    std::unordered_map<void*, size_t> in_use;
    std::vector<Block> blocks;
    size_t bytes = 0;
  };

  int take(Kept& kept, void** ptr, size_t size, void* stream);
  int give(Kept& kept, void* ptr, size_t size, void* stream);
  static void release(const Kept& kept, const Block& b);

  static int device_malloc(void* self, void** ptr, size_t size, cudaStream_t stream);
  static int device_free(void* self, void* ptr, size_t size, cudaStream_t stream);
  static int pinned_malloc(void* self, void** ptr, size_t size, cudaStream_t stream);
  static int pinned_free(void* self, void* ptr, size_t size, cudaStream_t stream);

  std::mutex mutex_;
  Kept device_kept_, pinned_kept_;
  nvjpegDevAllocatorV2_t device_{};
  nvjpegPinnedAllocatorV2_t pinned_{};
};

}  // namespace trident::cuda
