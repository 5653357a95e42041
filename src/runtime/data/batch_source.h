// Where a training or evaluation loop gets its batches from: an in-memory dataset
// (BatchIterator) or images decoded while training runs (ImageFolderBatches). One interface, so
// the trainer has one consumer loop whatever the data is.
#pragma once
#include <cstdint>
#include <functional>

#include "backends/image_batch.h"
#include "core/error.h"

namespace trident::data {

// Batches are always full: the final partial batch of an epoch is dropped (training) or padded
// by repeating its real samples, with `filled` saying how many rows are real (evaluation).
class BatchSource {
 public:
  virtual ~BatchSource() = default;

  virtual int64_t batch() const = 0;
  virtual int64_t batches_per_epoch() const = 0;
  // Rewinds to the first batch of `epoch`; what the epoch holds depends only on the epoch.
  virtual void start_epoch(int64_t epoch) = 0;
  // Writes the next batch, batch() * H * W * C floats (NHWC) and batch() labels (labels_out may
  // be null), and the count of real rows into `filled` when given. False, writing nothing, once
  // the epoch is exhausted.
  virtual bool next(float* images_out, int32_t* labels_out, int64_t* filled = nullptr) = 0;
  // The same batch as next() would write, handed out where the source made it instead of copied:
  // `take` is called once with its batch() * H * W * C floats, which stay valid and unchanged
  // until `take` returns (a device lane copies them from there; backends/input_lane.h). Only
  // where hands_out_in_place() says true; the default next_in_place() is an Error.
  virtual bool hands_out_in_place() const { return false; }
  virtual bool next_in_place(const std::function<void(const float* images)>& take, int32_t* labels_out,
                             int64_t* filled = nullptr) {
    (void)take, (void)labels_out, (void)filled;
    throw Error("this batch source cannot hand out its batches in place; use next()");
  }
  // A source of image files can instead hand out what a device needs to make the batch itself
  // (backends/image_batch.h): each row's JPEG bytes and crop, or the row made on the host where
  // the device's decoder would not take the file. can_hand_out_images() says whether it can;
  // hand_out_images(true) switches next_images() on from the next start_epoch (next() and
  // next_in_place() then refuse). `take` is called once per batch with the request, which stays
  // valid until it returns, and with the maker of any row the device fails to decode.
  virtual bool can_hand_out_images() const { return false; }
  virtual void hand_out_images(bool on) {
    if (on) throw Error("this batch source has no image files to hand out");
  }
  virtual bool next_images(const std::function<void(const ImageBatchRequest&, const HostRowMaker&)>& take,
                           int32_t* labels_out, int64_t* filled = nullptr) {
    (void)take, (void)labels_out, (void)filled;
    throw Error("this batch source cannot hand out image files; use next()");
  }
  // A source that makes its images on the host can instead hand each batch out as uint8 pixels
  // before the normalisation (backends/image_batch.h's PixelBatch), for a device that normalises
  // them itself: a quarter of the bytes to send. can_hand_out_pixels() says whether it can;
  // hand_out_pixels(true) switches next_pixels() on from the next start_epoch (next(),
  // next_in_place() and next_images() then refuse). `take` is called once per batch, whose
  // pixels stay valid and unchanged until it returns.
  virtual bool can_hand_out_pixels() const { return false; }
  virtual void hand_out_pixels(bool on) {
    if (on) throw Error("this batch source cannot hand out its batches as pixels");
  }
  virtual bool next_pixels(const std::function<void(const PixelBatch&)>& take, int32_t* labels_out,
                           int64_t* filled = nullptr) {
    (void)take, (void)labels_out, (void)filled;
    throw Error("this batch source cannot hand out its batches as pixels; use next()");
  }
  // Makes next() write only rows [first, first + count) of each batch (batch() becomes count,
  // `filled` counts the real rows among them), so a data-parallel rank makes only its share
  // (ShardedBatches); called before the first start_epoch. False, changing nothing, where the
  // source makes whole batches only.
  virtual bool keep_rows(int64_t first, int64_t count) {
    (void)first, (void)count;
    return false;
  }
};

}  // namespace trident::data
