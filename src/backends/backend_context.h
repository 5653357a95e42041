// Per-executable state of a backend: where its tensors live and how bytes move there.
// Host backends keep this base's memory (aligned host memory, memcpy); the cpu backend's
// context adds the scratch arena its kernels share, and the CUDA backend's owns device memory,
// streams, library handles and its plan cache. An Executable owns one context for its whole
// life, and what its kernels cache lives there, with one exception by design: the cpu
// backend's oneDNN primitives and timed algorithm choices are cached process-wide
// (backends/cpu/onednn_context.h), shared by every executable under a mutex, since the
// primitives are stateless (user-owned scratchpads) and identical layers may share them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend_options.h"
#include "backends/input_lane.h"

namespace trident {
namespace ir {
class Graph;
}

// Host memory as the CPU backends use it: 64-byte aligned, zero-filled; an Error saying how
// much when there is none. free_host() gives it back.
void* allocate_host(size_t bytes);
void free_host(void* p);

// A point in a backend's queue of work (a CUDA event on the GPU): record() marks the work queued
// so far, wait() blocks the host until that work has run. A loop that queues the next step before
// it reads the last one back waits on the last step's mark. Host backends run work as it is
// queued, so their marks are always reached.
class QueueMark {
 public:
  virtual ~QueueMark() = default;
  virtual void record() {}
  virtual void wait() {}
};

class BackendContext {
 public:
  virtual ~BackendContext() = default;

  // True when tensors live in device memory that the host cannot dereference.
  virtual bool on_device() const { return false; }
  // Seconds making this context took (a GPU's driver start-up): the part of a compile no cache
  // can save, reported apart.
  virtual double startup_seconds() const { return 0; }
  // True when kernels fix the number of host threads they run on when they are built (oneDNN's
  // primitives do), so an executable keeps one set of kernels per thread count it runs with.
  virtual bool kernels_depend_on_threads() const { return false; }
  // Zero-filled storage of `bytes` (at least 64-byte aligned); free() gives it back.
  virtual void* allocate(size_t bytes);
  virtual void free(void* p);
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes);
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes);
  // The same copies queued behind the work queued so far instead of finished on return (host
  // backends copy at once): the host memory (from allocate_host_copy) must stay as it is, and a
  // copy's result is there, only once a QueueMark recorded after the copy has been reached.
  virtual void queue_copy_to_device(void* dst, const void* host_src, size_t bytes) {
    copy_to_device(dst, host_src, bytes);
  }
  virtual void queue_copy_to_host(void* host_dst, const void* src, size_t bytes) { copy_to_host(host_dst, src, bytes); }
  virtual std::unique_ptr<QueueMark> make_queue_mark() { return std::make_unique<QueueMark>(); }
  // Zero-filled host memory for the host copies of device tensors (Executable::host_view), which
  // copy_to_device and copy_to_host move: page-locked on the GPU, so that a batch's upload runs
  // at the bus's speed instead of through a staging copy; plain host memory elsewhere.
  virtual void* allocate_host_copy(size_t bytes) { return allocate_host(bytes); }
  virtual void free_host_copy(void* p) { free_host(p); }
  // Between two buffers of the backend's memory (device to device on a GPU), finished on return.
  virtual void copy_within(void* dst, const void* src, size_t bytes);
  // Waits until every queued kernel has finished (a no-op on host backends).
  virtual void synchronize() {}
  // Positions i of `g`'s order whose kernel will run beside the next node's (on a second
  // stream) under `options`, so that the memory plan keeps the two nodes' tensors apart
  // (plan_memory's `concurrent`); asked once, before the plan is final. None on host backends.
  virtual std::vector<int> concurrent_steps(const ir::Graph& g, const BackendOptions& options) const {
    (void)g, (void)options;
    return {};
  }
  // One line of cache statistics for --verbose output; empty when the backend has none.
  virtual std::string cache_report() const { return {}; }
  // What the kernels built with this context are asked to do (set once, before they are
  // built): the user's backend options as chosen, and what the executable knows of itself.
  struct KernelOptions {
    BackendOptions backend;
    bool constant_weights = false;  // an inference executable: weights change only between prepare()s
    // Host memory a kernel may hold while it is built (autotuning's trial tensors): what the
    // run's memory budget leaves. A kernel times fewer candidates rather than pass it.
    uint64_t build_bytes = UINT64_MAX;
  };
  void set_kernel_options(const KernelOptions& o) { kernel_options_ = o; }
  const KernelOptions& kernel_options() const { return kernel_options_; }

  // Step recording (CUDA graphs on the GPU): the kernels a step enqueues between
  // begin_recording() and end_recording() are recorded instead of run; replay() runs the
  // recording. Host backends cannot record: begin_recording() says false.
  virtual bool begin_recording() { return false; }
  // True when the recording is complete and replayable; false when something enqueued while
  // recording could not be recorded (nothing of the step ran then: run it again directly).
  virtual bool end_recording() { return false; }
  virtual bool has_recording() const { return false; }
  virtual void replay() {}
  virtual void discard_recording() {}
  // Most device memory held at once by this context's allocations (0 on host backends).
  virtual size_t peak_device_bytes() const { return 0; }
  // Device memory free now, as the driver reports it; nullopt on host backends.
  virtual std::optional<uint64_t> free_device_bytes() const { return std::nullopt; }
  // The workspaces the kernels built so far reserved, allocated when they first run.
  virtual size_t workspace_bytes() const { return 0; }
  // A lane that copies batches of `bytes` to the device while a step runs (input_lane.h); null
  // on host backends, whose tensors are written in place. It must not outlive this context.
  virtual std::unique_ptr<InputLane> make_input_lane(size_t bytes) {
    (void)bytes;
    return nullptr;
  }

 private:
  KernelOptions kernel_options_;
};

}  // namespace trident
