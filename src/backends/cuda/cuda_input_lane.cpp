// How the next batch reaches the GPU while a step runs. Per batch b (host buffer b % 2, or the
// caller's memory for send_from, page-locked in place with cudaHostRegister):
//   copy stream:    wait taken, host[b % 2] -> staging, record landed[b % 2]
//   compute stream: wait landed[b % 2], staging -> input, record taken, ... the step ...
// so the staging buffer is rewritten only after the step before has copied it out, a host
// buffer only after the copy that read it (host_buffer() waits on its landed event), and the
// step reads its input only after it landed. The landed events and the step-end marks carry
// timing, so the device's wait for a batch is the time between the two on the device's clock.
// send_images() takes the copy's place on the copy stream: the batch is decoded and resampled
// into the staging buffer there (images/device_image_batcher.h), ordered by the same events;
// send_pixels() copies uint8 pixels and normalises them into it (images/pixel_normalise.h).
#include "backends/cuda/cuda_input_lane.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/images/device_image_batcher.h"
#include "backends/cuda/images/pixel_normalise.h"

namespace trident::cuda {
namespace {

class CudaInputLane final : public InputLane {
 public:
  CudaInputLane(CudaContext& ctx, size_t bytes) : ctx_(ctx), bytes_(bytes) {
    try {
      check(cudaStreamCreateWithPriority(&copy_stream_, cudaStreamNonBlocking, stream_priorities().lane),
            "creating the input copy stream");
      for (cudaEvent_t& e : landed_) check(cudaEventCreate(&e), "creating a CUDA event");
      for (cudaEvent_t& e : step_end_) check(cudaEventCreate(&e), "creating a CUDA event");
      check(cudaEventCreateWithFlags(&taken_, cudaEventDisableTiming), "creating a CUDA event");
      check(cudaEventCreateWithFlags(&pixels_read_, cudaEventDisableTiming), "creating a CUDA event");
      staging_ = ctx_.allocate(std::max<size_t>(bytes_, 1));
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaInputLane() override { release(); }
  CudaInputLane(const CudaInputLane&) = delete;
  CudaInputLane& operator=(const CudaInputLane&) = delete;

  size_t bytes() const override { return bytes_; }

  void* host_buffer() override {
    const int i = next_host_;
    if (sent_[i]) check(cudaEventSynchronize(landed_[i]), "the copy of an earlier batch to the GPU");
    // Made on first use: a lane fed only by send_from() holds no buffers of its own.
    if (!host_[i]) host_[i] = ctx_.allocate_host_copy(std::max<size_t>(bytes_, 1));
    return host_[i];
  }

  void send() override {
    const int i = next_host_;
    if (!host_[i]) throw Error("an input lane was sent its host buffer before host_buffer() gave it out");
    copy(host_[i], i);
    next_host_ = 1 - i;
  }

  void send_from(const void* host) override {
    lock_pages(host, bytes_);
    // Events of their own, two in turn: host_buffer() waits on landed_[i] only for copies that
    // read host_[i], and device_wait_seconds() reads the event of the batch before this one.
    const int event = 2 + static_cast<int>(from_sends_++ % 2);
    copy(host, event);
    check(cudaEventSynchronize(landed_[event]), "the copy of a batch to the GPU");
  }

  bool decodes_images(std::string* note) const override {
    if (!batcher_tried_) {
      batcher_ = DeviceImageBatcher::make(ctx_, &batcher_refusal_);
      batcher_tried_ = true;
    }
    if (note) *note = batcher_ ? batcher_->description() : batcher_refusal_;
    return batcher_ != nullptr;
  }

  void send_images(const ImageBatchRequest& batch, const HostRowMaker& on_host) override {
    std::string why;
    if (!decodes_images(&why)) throw Error("this GPU cannot decode the training images: " + why);
    const size_t row_bytes = static_cast<size_t>(batch.image_size) * batch.image_size * 3 * sizeof(float);
    if (batch.rows.size() * row_bytes != bytes_)
      throw Error("an input lane of " + std::to_string(bytes_) + " bytes was sent " + std::to_string(batch.rows.size()) +
                  " images of " + std::to_string(batch.image_size) + "x" + std::to_string(batch.image_size));
    // nvJPEG's hardware decoder copies each file to the device from where it lies.
    if (batch.memory) lock_pages(batch.memory, batch.memory_bytes);
    const int event = 2 + static_cast<int>(from_sends_++ % 2);
    begin_send();
    batcher_->make(batch, on_host, static_cast<float*>(staging_), copy_stream_);
    end_send(event);
  }

  bool takes_pixels() const override { return true; }

  // The pixels into a device buffer of their own on the copy stream, then normalised into the
  // staging buffer there: the copy reads a quarter of the floats' bytes.
  void send_pixels(const PixelBatch& batch) override {
    const size_t count = static_cast<size_t>(batch.rows) * batch.image_size * batch.image_size * 3;
    if (count * sizeof(float) != bytes_)
      throw Error("an input lane of " + std::to_string(bytes_) + " bytes was sent " + std::to_string(batch.rows) +
                  " rows of " + std::to_string(batch.image_size) + "x" + std::to_string(batch.image_size) + " pixels");
    if (!pixels_) {
      pixels_ = ctx_.allocate(std::max<size_t>(count, 1));
      // The context zeroes new memory on its compute stream, not the stream that fills it.
      check(cudaStreamSynchronize(ctx_.stream()), "zeroing the lane's pixel buffer");
    }
    lock_pages(batch.pixels, count);
    const int event = 2 + static_cast<int>(from_sends_++ % 2);
    begin_send();
    check(cudaMemcpyAsync(pixels_, batch.pixels, count, cudaMemcpyHostToDevice, copy_stream_),
          "copying a batch's pixels to the GPU");
    check(cudaEventRecord(pixels_read_, copy_stream_), "recording that a batch's pixels were read");
    launch_pixel_normalise(static_cast<const uint8_t*>(pixels_), static_cast<int64_t>(count), batch.scale, batch.shift,
                           static_cast<float*>(staging_), copy_stream_);
    end_send(event);
    // The caller may rewrite its pixels once the copy has read them; the normalising kernel after
    // it reads the device's copy, and deliver() waits for it on the device.
    check(cudaEventSynchronize(pixels_read_), "the copy of a batch's pixels to the GPU");
  }

  void release_host_memory() override {
    if (locked_.empty()) return;
    if (copy_stream_) cudaStreamSynchronize(copy_stream_);
    for (const void* p : locked_) cudaHostUnregister(const_cast<void*>(p));
    locked_.clear();
    cudaGetLastError();
  }

  void deliver(void* dst) override {
    if (!undelivered_) throw Error("an input lane was asked to deliver a batch it was not sent");
    const cudaStream_t s = ctx_.stream();
    check(cudaStreamWaitEvent(s, landed_[last_sent_], 0), "waiting for a batch to reach the GPU");
    check(cudaMemcpyAsync(dst, staging_, bytes_, cudaMemcpyDeviceToDevice, s), "moving a batch into the step's input");
    check(cudaEventRecord(taken_, s), "recording that a batch was taken");
    delivered_any_ = true;
    undelivered_ = false;
    // The wait to measure: from the step marked before this delivery to this batch's landing.
    pending_ = marks_ > 0 ? Wait{static_cast<int>((marks_ - 1) % 2), last_sent_} : Wait{};
  }

  void mark_step_end() override {
    check(cudaEventRecord(step_end_[marks_ % 2], ctx_.stream()), "marking the end of a step");
    ++marks_;
  }

  double device_wait_seconds() override {
    const Wait w = pending_;
    pending_ = Wait{};
    if (w.mark < 0) return 0;
    check(cudaEventSynchronize(landed_[w.landed]), "the copy of a batch to the GPU");
    check(cudaEventSynchronize(step_end_[w.mark]), "the step before a batch");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, step_end_[w.mark], landed_[w.landed]), "timing the wait for a batch");
    return std::max(0.0, static_cast<double>(ms) / 1e3);
  }

 private:
  struct Wait {
    int mark = -1, landed = -1;
  };

  // host -> staging on the copy stream once the last batch was taken; landed_[event] marks it.
  void copy(const void* host, int event) {
    begin_send();
    check(cudaMemcpyAsync(staging_, host, bytes_, cudaMemcpyHostToDevice, copy_stream_), "copying a batch to the GPU");
    end_send(event);
  }

  // The copy stream may rewrite the staging buffer once the step before has taken it.
  void begin_send() {
    if (undelivered_) throw Error("an input lane was sent a batch before the one before it was delivered");
    if (delivered_any_) check(cudaStreamWaitEvent(copy_stream_, taken_, 0), "ordering a batch's copy to the GPU");
  }

  void end_send(int event) {
    check(cudaEventRecord(landed_[event], copy_stream_), "recording a batch's arrival on the GPU");
    if (event < 2) sent_[event] = true;
    undelivered_ = true;
    last_sent_ = event;
  }

  // Page-locks `bytes` at `host`, memory send_from() or send_pixels() was given, once. Where the
  // driver refuses (memory that shares a page with memory locked before, a limit on locked
  // memory), the copy still works, staged through the driver's buffers.
  void lock_pages(const void* host, size_t bytes) {
    if (locked_.count(host) || refused_.count(host)) return;
    if (cudaHostRegister(const_cast<void*>(host), bytes, cudaHostRegisterDefault) == cudaSuccess) {
      locked_.insert(host);
    } else {
      cudaGetLastError();
      refused_.insert(host);
    }
  }

  void release() {
    release_host_memory();
    batcher_.reset();
    refused_.clear();
    if (copy_stream_) cudaStreamSynchronize(copy_stream_);
    if (staging_) cudaStreamSynchronize(ctx_.stream());  // a delivery may still read the staging buffer
    for (int i = 0; i < 2; ++i) {
      if (host_[i]) ctx_.free_host_copy(host_[i]);
      if (step_end_[i]) cudaEventDestroy(step_end_[i]);
      host_[i] = nullptr, step_end_[i] = nullptr;
    }
    for (cudaEvent_t& e : landed_) {
      if (e) cudaEventDestroy(e);
      e = nullptr;
    }
    if (taken_) cudaEventDestroy(taken_);
    if (pixels_read_) cudaEventDestroy(pixels_read_);
    if (staging_) ctx_.free(staging_);
    if (pixels_) ctx_.free(pixels_);
    pixels_ = nullptr;
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    taken_ = nullptr, pixels_read_ = nullptr, staging_ = nullptr, copy_stream_ = nullptr;
  }

  CudaContext& ctx_;
  const size_t bytes_;
  cudaStream_t copy_stream_ = nullptr;
  void* host_[2] = {nullptr, nullptr};
  void* staging_ = nullptr;
  void* pixels_ = nullptr;  // send_pixels()'s bytes on the device, made on first use
  // landed_[0], [1]: copies from host_[0], [1]; landed_[2], [3]: copies send_from() made.
  cudaEvent_t landed_[4] = {nullptr, nullptr, nullptr, nullptr}, step_end_[2] = {nullptr, nullptr}, taken_ = nullptr;
  cudaEvent_t pixels_read_ = nullptr;  // send_pixels(): its copy has read the caller's pixels
  bool sent_[2] = {false, false}, delivered_any_ = false, undelivered_ = false;
  int next_host_ = 0, last_sent_ = -1;
  int64_t marks_ = 0, from_sends_ = 0;
  Wait pending_;
  std::set<const void*> locked_, refused_;  // memory send_from() page-locked, or could not
  // The GPU's image decoding for send_images(), made when first asked for.
  mutable std::unique_ptr<DeviceImageBatcher> batcher_;
  mutable std::string batcher_refusal_;
  mutable bool batcher_tried_ = false;
};

}  // namespace

StreamPriorities stream_priorities() {
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "reading the stream priorities");
  const char* choice = std::getenv("TRIDENT_INPUT_LANE_PRIORITY");
  if (choice != nullptr && std::strcmp(choice, "high") == 0) return {least, greatest};
  return {least > greatest ? least - 1 : least, least};  // (greater numbers are lower priorities)
}

std::unique_ptr<InputLane> make_cuda_input_lane(CudaContext& ctx, size_t bytes) {
  return std::make_unique<CudaInputLane>(ctx, bytes);
}

}  // namespace trident::cuda
