// Slicing a global batch for one rank (sharded_batches.h).
#include "runtime/data/sharded_batches.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "runtime/data/parallel_copy.h"

namespace trident::data {

ShardedBatches::ShardedBatches(std::unique_ptr<BatchSource> global, int rank, int ranks, int64_t row_floats)
    : global_(std::move(global)), rank_(rank), row_floats_(row_floats) {
  if (ranks < 1 || rank < 0 || rank >= ranks) throw Error("rank " + std::to_string(rank) + " is not in a world of " + std::to_string(ranks));
  if (global_->batch() % ranks != 0)
    throw Error("a global batch of " + std::to_string(global_->batch()) + " rows does not split into " +
                std::to_string(ranks) + " equal shares");
  batch_ = global_->batch() / ranks;
  // A source that can make only this rank's rows does, and its batches pass through as they are.
  direct_ = global_->keep_rows(rank_ * batch_, batch_);
  if (direct_) return;
  images_.resize(static_cast<size_t>(global_->batch() * row_floats_));
  labels_.resize(static_cast<size_t>(global_->batch()));
}

bool ShardedBatches::next(float* images_out, int32_t* labels_out, int64_t* filled) {
  if (direct_) return global_->next(images_out, labels_out, filled);
  int64_t global_filled = global_->batch();
  if (!global_->next(images_.data(), labels_.data(), &global_filled)) return false;
  const int64_t first = rank_ * batch_;
  parallel_copy(images_out, images_.data() + first * row_floats_, static_cast<size_t>(batch_ * row_floats_) * sizeof(float));
  if (labels_out) std::copy_n(labels_.data() + first, batch_, labels_out);
  if (filled) *filled = std::clamp<int64_t>(global_filled - first, 0, batch_);
  return true;
}

void ShardedBatches::hand_out_images(bool on) {
  if (on && !can_hand_out_images()) BatchSource::hand_out_images(on);  // the sentence
  if (direct_) global_->hand_out_images(on);
}

bool ShardedBatches::next_images(const std::function<void(const ImageBatchRequest&, const HostRowMaker&)>& take,
                                 int32_t* labels_out, int64_t* filled) {
  if (!can_hand_out_images()) return BatchSource::next_images(take, labels_out, filled);
  return global_->next_images(take, labels_out, filled);
}

void ShardedBatches::hand_out_pixels(bool on) {
  if (on && !can_hand_out_pixels()) BatchSource::hand_out_pixels(on);  // the sentence
  if (direct_) global_->hand_out_pixels(on);
}

bool ShardedBatches::next_pixels(const std::function<void(const PixelBatch&)>& take, int32_t* labels_out,
                                 int64_t* filled) {
  if (!can_hand_out_pixels()) return BatchSource::next_pixels(take, labels_out, filled);
  return global_->next_pixels(take, labels_out, filled);
}

}  // namespace trident::data
