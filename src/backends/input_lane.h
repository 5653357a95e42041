// Feeding a device while it trains: the next batch is written into page-locked host memory and
// copied to the device on a stream of its own while the current step still runs, so neither the
// loader's work nor the bus's time lies between two steps. The executable's input tensor keeps
// its one address (a recorded step reads it there), so a batch lands in a staging buffer first
// and moves into the input at the start of its step, a device-to-device copy that costs a
// fraction of the bus's time. A batch is written into the lane's own host buffers, or sent from
// where a loader made it (send_from), or, on a lane that decodes images, made on the device from
// the image files' bytes (send_images), or normalised there from the uint8 pixels the loader's
// workers cropped and resized (send_pixels, a quarter of the bytes). Host backends have no lane: their batches are written in
// place.
#pragma once
#include <cstddef>
#include <string>

#include "backends/image_batch.h"
#include "core/error.h"

namespace trident {

class InputLane {
 public:
  virtual ~InputLane() = default;

  // Bytes of one batch, as the lane was made for.
  virtual size_t bytes() const = 0;
  // Where to write the next batch: one of two page-locked host buffers, in turn. Blocks, when
  // needed, until the copy that last read the returned buffer has finished.
  virtual void* host_buffer() = 0;
  // Starts copying the last host_buffer() to the device, beside whatever runs there; the copy
  // waits for the batch before it to have been taken by deliver().
  virtual void send() = 0;
  // As send(), from `host` (bytes() of memory the caller owns, such as a loader's ring) instead of
  // host_buffer(), and returns only once the copy has read it, so the caller may rewrite it then.
  // The lane page-locks such memory the first time it sees it, so that the copy runs at the bus's
  // speed without a copy on the host, and keeps it locked until release_host_memory().
  virtual void send_from(const void* host) = 0;
  // Whether the lane can decode and augment images itself (send_images). `note` says with what
  // ("nvJPEG 13.0.0 on the hardware JPEG engines"), or why not (no decoder library).
  virtual bool decodes_images(std::string* note) const {
    if (note) *note = "this backend's input lane does not decode images";
    return false;
  }
  // As send_from(), but the batch is made on the device: the JPEG rows decoded there, resampled,
  // flipped and normalised into the batch (bytes() is rows · image_size² · 3 floats), the rows
  // made on the host uploaded as they are. A row whose JPEG the device fails to decode is made
  // by `on_host` and uploaded. Returns once the lane has read everything `batch` points to.
  virtual void send_images(const ImageBatchRequest& batch, const HostRowMaker& on_host);
  // Whether the lane takes batches as uint8 pixels (send_pixels).
  virtual bool takes_pixels() const { return false; }
  // As send_from(), from a batch of uint8 pixels (bytes() / 4 of them): the device turns each
  // into its float, x · scale + shift of its channel. Returns once the copy has read them. The
  // lane page-locks the pixels' memory as send_from() does.
  virtual void send_pixels(const PixelBatch& batch);
  // Unlocks the memory send_from() locked (waiting for copies in flight): call it before that
  // memory is freed. The lane's destructor calls it too.
  virtual void release_host_memory() = 0;
  // Queues, before any work queued after it: wait for the last send() to land, then copy it into
  // `dst` (bytes() of the backend's memory).
  virtual void deliver(void* dst) = 0;
  // Marks the end of the work queued so far (a step): the time from there to the landing of the
  // next batch delivered is time the device sat waiting for data.
  virtual void mark_step_end() = 0;
  // Seconds the device waited, before the last deliver(), for that batch to land after the step
  // marked before it; 0 when it had landed in time or no step was marked. Waits for the batch.
  virtual double device_wait_seconds() = 0;
};

inline void InputLane::send_images(const ImageBatchRequest&, const HostRowMaker&) {
  std::string note;
  decodes_images(&note);
  throw Error("images cannot be sent to this input lane: " + note);
}

inline void InputLane::send_pixels(const PixelBatch&) {
  throw Error("this backend's input lane does not take batches as uint8 pixels");
}

}  // namespace trident
