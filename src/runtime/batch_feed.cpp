// The batch feed of batch_feed.h: where an image source's files are decoded, and one fetch for
// each way a batch can reach the executable.
#include "runtime/batch_feed.h"

#include "core/error.h"

namespace trident::runtime {

BatchFeed::BatchFeed(data::BatchSource& batches, InputLane* lane, TensorView host_images, TrainConfig::Decode decode,
                     bool send_pixels, const std::string& purpose)
    : batches_(batches), lane_(lane), host_images_(host_images) {
  choose_decoding(decode, send_pixels, purpose);
  in_place_ = lane_ && !device_images_ && !pixels_ && batches_.hands_out_in_place();
}

void BatchFeed::choose_decoding(TrainConfig::Decode decode, bool send_pixels, const std::string& purpose) {
  using Decode = TrainConfig::Decode;
  if (!batches_.can_hand_out_images()) {
    if (decode == Decode::gpu)
      throw Error("decoding on the GPU (--decode gpu) is for an image folder's files, and the " + purpose +
                  " data is not one");
    return;
  }
  if (lane_ == nullptr) {  // a host backend, or --no-upload-ahead: the workers make the floats
    if (decode == Decode::gpu)
      throw Error("decoding on the GPU (--decode gpu) needs a GPU backend and its input lane (not --no-upload-ahead)");
    batches_.hand_out_images(false);
    batches_.hand_out_pixels(false);
    return;
  }
  std::string note = "--decode cpu";
  device_images_ = decode != Decode::cpu && lane_->decodes_images(&note);
  if (!device_images_ && decode == Decode::gpu)
    throw Error("the " + purpose + " images cannot be decoded on the GPU (--decode gpu): " + note);
  batches_.hand_out_images(device_images_);
  // Made on the CPU: sent as uint8 pixels where the lane normalises them, a quarter of the bytes.
  pixels_ = send_pixels && !device_images_ && lane_->takes_pixels() && batches_.can_hand_out_pixels();
  batches_.hand_out_pixels(pixels_);
  decoded_by_ = device_images_ ? "the GPU (" + note + ")"
                               : "the CPU workers (" + note + (pixels_ ? "; sent as uint8 pixels" : "") + ")";
}

bool BatchFeed::fetch(int32_t* labels, int64_t* filled) {
  if (!lane_) return batches_.next(host_images_.as<float>(), labels, filled);
  InputLane& lane = *lane_;
  if (device_images_)
    return batches_.next_images([&](const ImageBatchRequest& b, const HostRowMaker& m) { lane.send_images(b, m); },
                                labels, filled);
  if (pixels_) return batches_.next_pixels([&](const PixelBatch& p) { lane.send_pixels(p); }, labels, filled);
  if (in_place_) return batches_.next_in_place([&](const float* made) { lane.send_from(made); }, labels, filled);
  if (!batches_.next(static_cast<float*>(lane.host_buffer()), labels, filled)) return false;
  lane.send();
  return true;
}

}  // namespace trident::runtime
