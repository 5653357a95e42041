// NCCL, the cuda backend's collective library, behind one small class. The library is loaded
// when the first communicator is made (dlopen of libnccl.so.2), so a single-GPU trident neither
// links it nor needs it installed. A distributed world's communicator is made once per process
// (rank 0's unique id broadcast over the world's own collective, core/world.h)
// and shared by every kernel that uses it; it goes when the last of them does.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace trident::distributed {
class World;
}

namespace trident::cuda {

class NcclCommunicator {
 public:
  // Collective over `world`: every rank must make it, in the same order. Throws an Error saying
  // what is missing (no libnccl.so.2, a failed initialisation).
  NcclCommunicator(distributed::World& world, int device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Every span replaced by its element-wise mean over the ranks, enqueued on `stream` as one
  // group of calls (capturable in a CUDA graph).
  void average(const std::vector<std::pair<float*, size_t>>& spans, cudaStream_t stream) const;
  // `count` values of `type` at `in`, summed element-wise over the ranks into `out` (which may
  // be `in`).
  struct SumSpan {
    const void* in = nullptr;
    void* out = nullptr;
    size_t count = 0;
    ncclDataType_t type = ncclFloat32;
  };
  // Every span summed over the ranks, enqueued on `stream` as one group of calls.
  void sum(const std::vector<SumSpan>& spans, cudaStream_t stream) const;
  int size() const { return size_; }
  // "NCCL 2.28.9", for reports.
  static std::string version();

 private:
  ncclComm_t comm_ = nullptr;
  int size_ = 1;
};

// The communicator of `world` on `device`, made on first use (collectively) and shared.
std::shared_ptr<NcclCommunicator> nccl_communicator(distributed::World& world, int device);

}  // namespace trident::cuda
