// Two training steps in flight: the training loop queues step k + 1 before it reads step k's
// loss and logits back, so that the device does not sit idle while the host reads them, scores
// the step and fetches the next batch (a GPU finished each step, then waited about a millisecond
// for the next one, when every copy waited for the device). A step's small inputs (its labels and
// learning rate) are sent from, and its outputs come back into, host buffers of its own slot
// (page-locked on a GPU); a mark queued after the outputs says when the slot may be read and
// written again. On host backends every copy is done on return and the marks are always reached.
#pragma once
#include <cstdint>
#include <memory>

#include "backends/backend_context.h"
#include "runtime/executable.h"

namespace trident::runtime {

class QueuedSteps {
 public:
  // `exe`: a training executable with f32 "lr", int32 "labels" [batch] and f32 loss and logits.
  explicit QueuedSteps(Executable& exe);
  // Waits for the copies in flight, which write into this object's buffers.
  ~QueuedSteps();
  QueuedSteps(const QueuedSteps&) = delete;
  QueuedSteps& operator=(const QueuedSteps&) = delete;

  // The labels of the step that uses `slot` (0 or 1), written by the host before send(). The
  // slot's last step must have been waited for.
  int32_t* labels(int slot) { return static_cast<int32_t*>(slots_[slot].labels.get()); }
  // Queues the slot's labels and the learning rate `lr` for the next run().
  void send(int slot, float lr);
  // After run(): queues the step's loss and logits into the slot's buffers and marks the slot.
  void read_back(int slot);
  // Waits for the slot's read_back(); loss() and logits() hold that step's then.
  void wait(int slot);
  float loss(int slot) const { return *static_cast<const float*>(slots_[slot].loss.get()); }
  const float* logits(int slot) const { return static_cast<const float*>(slots_[slot].logits.get()); }

 private:
  struct HostFree {
    BackendContext* ctx;
    void operator()(void* p) const { ctx->free_host_copy(p); }
  };
  using HostBuffer = std::unique_ptr<void, HostFree>;
  struct Slot {
    HostBuffer labels, lr, loss, logits;
    std::unique_ptr<QueueMark> done;
    bool pending = false;  // read back, not yet waited for
  };
  HostBuffer allocate(size_t bytes);

  BackendContext& ctx_;
  TensorView labels_, lr_, loss_, logits_;  // the executable's tensors, in the backend's memory
  Slot slots_[2];
};

}  // namespace trident::runtime
