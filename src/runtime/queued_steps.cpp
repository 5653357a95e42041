// Host buffers and marks of the two training steps in flight (queued_steps.h).
#include "runtime/queued_steps.h"

#include "core/error.h"

namespace trident::runtime {

namespace {
TensorView checked(const Executable& exe, int value, DType dtype, const char* what) {
  if (value < 0) throw Error(std::string("a training executable without ") + what + " cannot train");
  const TensorView t = exe.view(value);
  if (t.dtype != dtype)
    throw Error(std::string("the training executable's ") + what + " is " + std::string(dtype_name(t.dtype)) +
                ", where the training loop reads " + std::string(dtype_name(dtype)));
  return t;
}
}  // namespace

QueuedSteps::QueuedSteps(Executable& exe)
    : ctx_(exe.context()),
      labels_(checked(exe, exe.value_id("labels"), DType::i32, "labels")),
      lr_(checked(exe, exe.value_id("lr"), DType::f32, "learning rate")),
      loss_(checked(exe, exe.loss(), DType::f32, "loss")),
      logits_(checked(exe, exe.logits(), DType::f32, "logits")) {
  for (Slot& s : slots_) {
    s.labels = allocate(labels_.bytes());
    s.lr = allocate(lr_.bytes());
    s.loss = allocate(loss_.bytes());
    s.logits = allocate(logits_.bytes());
    s.done = ctx_.make_queue_mark();
  }
}

QueuedSteps::~QueuedSteps() {
  for (Slot& s : slots_) {
    if (!s.pending) continue;
    try {
      s.done->wait();
    } catch (...) {
      try {
        ctx_.synchronize();  // a failed step: nothing of it may still write here
      } catch (...) {
      }
    }
  }
}

QueuedSteps::HostBuffer QueuedSteps::allocate(size_t bytes) {
  return HostBuffer(ctx_.allocate_host_copy(bytes), HostFree{&ctx_});
}

void QueuedSteps::send(int slot, float lr) {
  Slot& s = slots_[slot];
  if (s.pending) throw Error("a training step was sent through a slot whose last step was not waited for");
  *static_cast<float*>(s.lr.get()) = lr;
  ctx_.queue_copy_to_device(labels_.data, s.labels.get(), labels_.bytes());
  ctx_.queue_copy_to_device(lr_.data, s.lr.get(), lr_.bytes());
}

void QueuedSteps::read_back(int slot) {
  Slot& s = slots_[slot];
  ctx_.queue_copy_to_host(s.loss.get(), loss_.data, loss_.bytes());
  ctx_.queue_copy_to_host(s.logits.get(), logits_.data, logits_.bytes());
  s.done->record();
  s.pending = true;
}

void QueuedSteps::wait(int slot) {
  Slot& s = slots_[slot];
  if (!s.pending) return;
  s.pending = false;
  s.done->wait();
}

}  // namespace trident::runtime
