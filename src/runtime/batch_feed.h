// How a loop's batches reach an executable's input, for the training and the evaluation loops
// alike: written into the input's host copy between steps (host backends, or upload-ahead off),
// or sent ahead through a device's input lane while the step before runs — from the lane's own
// host buffer, from where an image folder made them (as uint8 pixels where the lane normalises
// them), or as the image files themselves for the device to decode (backends/input_lane.h).
#pragma once
#include <cstdint>
#include <string>

#include "backends/input_lane.h"
#include "core/tensor_view.h"
#include "runtime/data/batch_source.h"
#include "runtime/trainer.h"

namespace trident::runtime {

class BatchFeed {
 public:
  // With `lane` null, fetch() writes into `host_images` (the executable's host copy of its input).
  // Decides where an image source's files are decoded (`decode`, as TrainConfig::decode) and tells
  // the source; an Error for --decode gpu where that cannot be. Images made on the CPU are sent
  // as uint8 pixels where `send_pixels` and the lane and source can (TrainConfig::send_pixels).
  // `purpose` ("training", "evaluation") names the images in those sentences.
  BatchFeed(data::BatchSource& batches, InputLane* lane, TensorView host_images, TrainConfig::Decode decode,
            bool send_pixels, const std::string& purpose);

  // The next batch: its labels into `labels` (batch() of them) and its real rows into `filled`
  // when given; the images into the host copy, or sent into the lane (deliver() takes them from
  // there). False once the source's epoch is over.
  bool fetch(int32_t* labels, int64_t* filled = nullptr);

  // What decodes an image source's files ("the GPU (nvJPEG …)", "the CPU workers (…)"); empty for
  // other sources and without a lane.
  const std::string& decoded_by() const { return decoded_by_; }

 private:
  // Where an image source's files are decoded; tells the source.
  void choose_decoding(TrainConfig::Decode decode, bool send_pixels, const std::string& purpose);

  data::BatchSource& batches_;
  InputLane* lane_;
  TensorView host_images_;
  bool device_images_ = false, pixels_ = false, in_place_ = false;
  std::string decoded_by_;
};

}  // namespace trident::runtime
