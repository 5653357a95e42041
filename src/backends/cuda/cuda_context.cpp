// Device, streams, handles, workspaces and the plan cache of the "cuda" backend.
#include "backends/cuda/cuda_context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_input_lane.h"
#include "backends/cuda/dgrad_beside_wgrad.h"
#include "backends/cuda/verbose.h"
#include "core/verbose.h"
#include "core/world.h"

namespace trident::cuda {

namespace {

// The driver feeds the GPU through CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 unless set) and
// maps streams onto them in turn, so streams can share a queue and a kernel waits behind another
// stream's kernels. nvJPEG's hardware decoder runs a short kernel per image on streams of its own
// and waits for them on the host: where one shared the compute stream's queue, the decode call
// waited for the whole training step (docs/GPU.md, "Why the hardware decode waits"). 32 is the
// driver's largest. Set when the process loads, before the first CUDA call; a value the user set
// is kept.
const bool kConnectionsChosen = [] { return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0; }();

}  // namespace

bool gpu_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why)
      *why = e == cudaSuccess ? "no CUDA GPU is visible on this machine"
                              : std::string("no CUDA GPU is usable on this machine (") + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return true;
}

namespace {

// The GPU a process takes: 0 alone; under a distributed world, the one of its local rank, or the
// only one it sees where the launcher gave each rank its own (CUDA_VISIBLE_DEVICES per rank).
int device_for(const distributed::World* world) {
  if (!world || world->local_size() < 2) return 0;
  int n = 0;
  check(cudaGetDeviceCount(&n), "counting the GPUs");
  if (n == 1) return 0;
  if (world->local_rank() >= n)
    throw Error(distributed::rank_text(*world) + " is local rank " + std::to_string(world->local_rank()) + " of " +
                std::to_string(world->local_size()) + " on its machine, which has only " + std::to_string(n) +
                " GPUs: start at most one process per GPU");
  return world->local_rank();
}

}  // namespace

CudaContext::CudaContext(const BackendOptions& options) {
  const long long start = now_ns();
  std::string why;
  if (!gpu_available(&why)) throw Error("--device cuda needs a GPU: " + why);
  device_ = device_for(options.world.get());
  check(cudaSetDevice(device_), "selecting GPU " + std::to_string(device_));
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device_), "reading the GPU's properties");
  sm_count_ = prop.multiProcessorCount;
  cc_ = prop.major * 10 + prop.minor;
  name_ = prop.name;
  prefix_ = "sm" + std::to_string(cc_) + "/cudnn" + std::to_string(cudnnGetVersion()) + "/";
  const double device_ms = elapsed_ms(start);
  // Above the input lane's, which fills the gaps the step leaves (cuda_input_lane.h).
  const int priority = stream_priorities().step;
  for (cudaStream_t* s : {&stream_, &side_stream_, &collective_stream_})
    check(cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, priority), "creating a CUDA stream");
  check(cudnnCreate(&cudnn_), "creating the cuDNN handle");
  check(cudnnSetStream(cudnn_, stream_), "binding cuDNN to its stream");
  check(cudnnCreate(&cudnn_side_), "creating the cuDNN handle");
  check(cudnnSetStream(cudnn_side_, side_stream_), "binding cuDNN to its stream");
  check(cublasLtCreate(&cublaslt_), "creating the cuBLASLt handle");
  startup_s_ = elapsed_ms(start) / 1e3;
  if (verbose())
    verbose_note("context on " + name_ + " ready in " + ms_text(elapsed_ms(start)) + " (GPU start " +
                 ms_text(device_ms) + ", then streams, two cuDNN handles and cuBLASLt)");
}

CudaContext::~CudaContext() {
  // Destructors must not throw: failures here are ignored (the process is tearing down).
  cudaStreamSynchronize(stream_);
  cudaStreamSynchronize(side_stream_);
  cudaStreamSynchronize(collective_stream_);
  if (recording_) cudaGraphExecDestroy(recording_);
  for (void* w : workspace_)
    if (w) cudaFree(w);
  cache_.clear();  // plans reference the handles: release them first
  for (auto& [key, f] : forks_) {
    cudaEventDestroy(f.fork);
    cudaEventDestroy(f.join);
  }
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (cudnn_side_) cudnnDestroy(cudnn_side_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (collective_stream_) cudaStreamDestroy(collective_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaContext::allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  const cudaError_t e = cudaMalloc(&p, rounded);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error("out of GPU memory: the plan needs " + std::to_string(rounded >> 20) + " MiB more, " +
                std::to_string(free_b >> 20) + " MiB of " + std::to_string(total_b >> 20) +
                " MiB are free; use a smaller --batch");
  }
  check(cudaMemsetAsync(p, 0, rounded, stream_), "zeroing new GPU memory");
  std::lock_guard<std::mutex> lock(mu_);
  sizes_[p] = rounded;
  live_bytes_ += rounded;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return p;
}

void CudaContext::free(void* p) {
  if (!p) return;
  cudaStreamSynchronize(stream_);
  cudaFree(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(p);
  if (it != sizes_.end()) {
    live_bytes_ -= it->second;
    sizes_.erase(it);
  }
}

void* CudaContext::allocate_host_copy(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // not sticky: fall back to pageable memory, which copies slower but works
    return allocate_host(bytes);
  }
  std::memset(p, 0, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  pinned_.insert(p);
  return p;
}

void CudaContext::free_host_copy(void* p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pinned_.erase(p)) return free_host(p);
  }
  cudaFreeHost(p);
}

void CudaContext::copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "a host-to-GPU copy");
  // The host buffer may change right after the call: wait until the copy has read it.
  check(cudaStreamSynchronize(stream_), "a host-to-GPU copy");
}

void CudaContext::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "a GPU-to-host copy");
  check(cudaStreamSynchronize(stream_), "the step (a kernel failed while it ran)");
}

void CudaContext::queue_copy_to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes) check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "a host-to-GPU copy");
}

void CudaContext::queue_copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes) check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "a GPU-to-host copy");
}

namespace {
class CudaQueueMark final : public QueueMark {
 public:
  explicit CudaQueueMark(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "making an event");
  }
  ~CudaQueueMark() override { cudaEventDestroy(event_); }
  void record() override { check(cudaEventRecord(event_, stream_), "marking the queued work"); }
  // An event never recorded counts as reached.
  void wait() override { check(cudaEventSynchronize(event_), "the step (a kernel failed while it ran)"); }

 private:
  cudaStream_t stream_;
  cudaEvent_t event_ = nullptr;
};
}  // namespace

std::unique_ptr<QueueMark> CudaContext::make_queue_mark() { return std::make_unique<CudaQueueMark>(stream_); }

void CudaContext::copy_within(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "a GPU-to-GPU copy");
  check(cudaStreamSynchronize(stream_), "the step (a kernel failed while it ran)");
}

void CudaContext::synchronize() {
  check(cudaStreamSynchronize(side_stream_), "the step (a kernel on the side stream failed)");
  check(cudaStreamSynchronize(collective_stream_), "the step (a collective failed)");
  check(cudaStreamSynchronize(stream_), "the step (a kernel failed while it ran)");
}

std::vector<int> CudaContext::concurrent_steps(const ir::Graph& g, const BackendOptions& options) const {
  std::vector<int> steps;
  if (!options.side_stream) return steps;
  for (int i = 0; i + 1 < static_cast<int>(g.order().size()); ++i)
    if (dgrad_then_wgrad(g, i)) steps.push_back(i);
  return steps;
}

std::string CudaContext::cache_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return "cuda plan cache: " + std::to_string(cache_.size()) + " plans, " + std::to_string(hits_.load()) +
         " hits, " + std::to_string(misses_.load()) + " misses; workspace " +
         std::to_string((reserved_[0] + reserved_[1]) >> 20) + " MiB; " + name_;
}

CudaContext::StreamFork CudaContext::stream_fork(int key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = forks_.find(key);
  if (it != forks_.end()) return it->second;
  StreamFork f;
  check(cudaEventCreateWithFlags(&f.fork, cudaEventDisableTiming), "creating a CUDA event");
  check(cudaEventCreateWithFlags(&f.join, cudaEventDisableTiming), "creating a CUDA event");
  forks_.emplace(key, f);
  return f;
}

void CudaContext::reserve_workspace(int slot, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  reserved_[slot] = std::max(reserved_[slot], bytes);
}

std::optional<uint64_t> CudaContext::free_device_bytes() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return free_b;
}

size_t CudaContext::workspace_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_[0] + reserved_[1];
}

void* CudaContext::workspace(int slot) {
  size_t want;
  {
    std::lock_guard<std::mutex> lock(mu_);
    want = reserved_[slot];
    if (workspace_[slot] && allocated_[slot] >= want) return workspace_[slot];
  }
  if (workspace_[slot]) {
    synchronize();
    cudaFree(workspace_[slot]);
    std::lock_guard<std::mutex> lock(mu_);
    live_bytes_ -= allocated_[slot];
  }
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(want, 256)), "allocating a " + std::to_string(want >> 20) + " MiB workspace");
  // TRIDENT_POISON_ARENA=1 (see Executable::compile): scratch starts as NaN too, so a kernel
  // that reads workspace it did not write fails visibly.
  if (const char* poison = std::getenv("TRIDENT_POISON_ARENA"); poison && std::string(poison) == "1")
    check(cudaMemsetAsync(p, 0xff, std::max<size_t>(want, 256), stream_), "poisoning a workspace");
  std::lock_guard<std::mutex> lock(mu_);
  workspace_[slot] = p;
  allocated_[slot] = std::max<size_t>(want, 256);
  live_bytes_ += allocated_[slot];
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return p;
}

bool CudaContext::begin_recording() {
  discard_recording();
  // Work queued before the step must not become part of it.
  synchronize();
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

bool CudaContext::end_recording() {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  bool ok = ended == cudaSuccess && graph != nullptr;
  if (ok) ok = cudaGraphInstantiate(&recording_, graph, 0) == cudaSuccess;
  if (graph) cudaGraphDestroy(graph);
  if (!ok) {
    cudaGetLastError();  // an invalidated capture leaves a sticky-free error: clear it
    recording_ = nullptr;
    if (verbose()) verbose_note("the step could not be recorded as a CUDA graph; it runs kernel by kernel");
  }
  return ok;
}

void CudaContext::replay() {
  check(cudaGraphLaunch(recording_, stream_), "replaying the recorded step");
}

void CudaContext::discard_recording() {
  if (!recording_) return;
  cudaStreamSynchronize(stream_);
  cudaGraphExecDestroy(recording_);
  recording_ = nullptr;
}

std::unique_ptr<InputLane> CudaContext::make_input_lane(size_t bytes) { return make_cuda_input_lane(*this, bytes); }

CudaContext& cuda_context(BackendContext& ctx) {
  auto* c = dynamic_cast<CudaContext*>(&ctx);
  if (!c) throw Error("a cuda kernel was built without the cuda backend's context");
  return *c;
}

}  // namespace trident::cuda
