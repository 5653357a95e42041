// The "cuda" backend's context: one GPU, its streams, the cuDNN and cuBLASLt handles, shared
// workspaces, and the cache of built cuDNN plans (keyed by the full signature: op, shapes,
// dtypes, strides, attributes, GPU and library versions). One context per executable, owned
// by it; the cache is guarded by a mutex, so kernels may be built from several threads.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "backends/backend_context.h"

namespace trident::cuda {

// Whether a usable CUDA GPU is present; when not, `why` says why in one sentence.
bool gpu_available(std::string* why = nullptr);

class CudaContext final : public BackendContext {
 public:
  // Uses device 0 (CUDA_VISIBLE_DEVICES selects another); one rank of a distributed world
  // (options.world) takes the GPU of its local rank. Throws an Error when there is no GPU.
  explicit CudaContext(const BackendOptions& options = {});
  ~CudaContext() override;
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  bool on_device() const override { return true; }
  void* allocate(size_t bytes) override;  // cudaMalloc + zero fill
  void free(void* p) override;
  void copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void queue_copy_to_device(void* dst, const void* host_src, size_t bytes) override;  // on stream()
  void queue_copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  std::unique_ptr<QueueMark> make_queue_mark() override;  // an event on stream(), where every step ends
  void copy_within(void* dst, const void* src, size_t bytes) override;
  void* allocate_host_copy(size_t bytes) override;  // cudaHostAlloc (page-locked) + zero fill
  void free_host_copy(void* p) override;
  void synchronize() override;
  // With the side stream, each dgrad that runs beside its wgrad (dgrad_beside_wgrad.h).
  std::vector<int> concurrent_steps(const ir::Graph& g, const BackendOptions& options) const override;
  std::string cache_report() const override;

  // A step recorded as a CUDA graph by capturing stream() (the side stream joins through the
  // kernels' fork/join events). Capture is thread-local: a call that cannot be captured (a
  // synchronisation, an allocation) invalidates it, and end_recording() says false.
  bool begin_recording() override;
  bool end_recording() override;
  bool has_recording() const override { return recording_ != nullptr; }
  void replay() override;
  void discard_recording() override;

  // Every kernel runs on stream(); side_stream() is for work that may overlap it (wgrad next
  // to dgrad), joined back with events by the kernel that forks it.
  cudaStream_t stream() const { return stream_; }
  cudaStream_t side_stream() const { return side_stream_; }
  // The stream the collectives (NCCL's all-reduce) run on, beside the backward on stream().
  cudaStream_t collective_stream() const { return collective_stream_; }
  int device() const { return device_; }
  cudnnHandle_t cudnn() const { return cudnn_; }            // bound to stream()
  cudnnHandle_t cudnn_side() const { return cudnn_side_; }  // bound to side_stream()
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  int sm_count() const { return sm_count_; }
  int compute_capability() const { return cc_; }  // e.g. 90
  const std::string& device_name() const { return name_; }
  // "sm90/cudnn91900": the part of every cache key that names the GPU and library.
  const std::string& signature_prefix() const { return prefix_; }

  // The pair of events that lets one kernel run on side_stream() beside the next one on
  // stream(): `fork` is recorded on stream() before the side work starts, `join` on
  // side_stream() after it ends. One pair per key (a value id of the graph); made on first use.
  struct StreamFork {
    cudaEvent_t fork = nullptr, join = nullptr;
  };
  StreamFork stream_fork(int key);

  // Scratch memory, one per stream (slot 0: stream(), slot 1: side_stream()). Kernels reserve
  // their largest need when built; workspace() returns a buffer of at least the reserved size.
  void reserve_workspace(int slot, size_t bytes);
  void* workspace(int slot);

  // The object cached under `key`, or make()'s result, cached. Keys must carry everything the
  // object depends on (use signature_prefix()).
  template <class T>
  std::shared_ptr<T> cached(const std::string& key, const std::function<std::shared_ptr<T>()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++hits_;
      return std::static_pointer_cast<T>(it->second);
    }
    ++misses_;
    std::shared_ptr<T> made = make();
    cache_.emplace(key, made);
    return made;
  }
  int64_t cache_hits() const { return hits_; }
  int64_t cache_misses() const { return misses_; }

  // Device memory held by this context's allocations and workspaces (bytes).
  size_t peak_device_bytes() const override { return peak_bytes_; }
  double startup_seconds() const override { return startup_s_; }
  std::optional<uint64_t> free_device_bytes() const override;
  size_t workspace_bytes() const override;
  size_t live_bytes() const { return live_bytes_; }
  std::unique_ptr<InputLane> make_input_lane(size_t bytes) override;  // cuda_input_lane.h

 private:
  int device_ = 0;
  cudaGraphExec_t recording_ = nullptr;
  int sm_count_ = 0, cc_ = 0;
  std::string name_, prefix_;
  double startup_s_ = 0;
  cudaStream_t stream_ = nullptr, side_stream_ = nullptr, collective_stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr, cudnn_side_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  size_t reserved_[2] = {0, 0}, allocated_[2] = {0, 0};
  void* workspace_[2] = {nullptr, nullptr};
  std::map<void*, size_t> sizes_;
  std::set<void*> pinned_;  // host copies cudaHostAlloc gave (the others came from allocate_host)
  std::map<int, StreamFork> forks_;
  size_t live_bytes_ = 0, peak_bytes_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<void>> cache_;
  std::atomic<int64_t> hits_{0}, misses_{0};
};

// The context a "cuda" kernel was built with (an Error if it is another backend's).
CudaContext& cuda_context(BackendContext& ctx);

}  // namespace trident::cuda
