// Mini-batch iteration with deterministic per-epoch shuffling (see batch_iterator.h).
// The permutation is recomputed from scratch each epoch (data/random.h's epoch_order), so an
// epoch's order depends only on (seed, epoch), never on which epochs were visited before.
#include "runtime/data/batch_iterator.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "runtime/data/random.h"

namespace trident::data {

BatchIterator::BatchIterator(const Dataset& ds, int64_t batch, bool shuffle, uint64_t seed,
                             bool drop_last)
    : ds_(&ds), batch_(batch), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  if (batch < 1)
    throw Error("batch size must be at least 1, got " + std::to_string(batch) +
                " for dataset '" + ds.name + "'");
  validate(ds);
  if (drop_last && batch > ds.count)
    throw Error("batch size " + std::to_string(batch) + " exceeds the " +
                std::to_string(ds.count) + " samples of dataset '" + ds.name +
                "', so dropping the last partial batch leaves no batch at all");
  start_epoch(0);
}

int64_t BatchIterator::batches_per_epoch() const {
  return drop_last_ ? ds_->count / batch_ : (ds_->count + batch_ - 1) / batch_;
}

void BatchIterator::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  next_batch_ = 0;
  order_ = epoch_order(ds_->count, shuffle_, seed_, epoch);
}

bool BatchIterator::next(float* images_out, int32_t* labels_out, int64_t* filled) {
  if (images_out == nullptr)
    throw Error("BatchIterator::next over dataset '" + ds_->name +
                "' was given a null image buffer");
  if (next_batch_ >= batches_per_epoch()) return false;
  const int64_t begin = next_batch_ * batch_;
  const int64_t real = std::min(batch_, ds_->count - begin);
  const int64_t sample = ds_->sample_size();
  const size_t row_bytes = static_cast<size_t>(sample) * sizeof(float);
  for (int64_t row = 0; row < batch_; ++row) {
    // Rows past the real ones repeat the batch's real samples cyclically.
    const int64_t idx = order_[static_cast<size_t>(begin + row % real)];
    std::memcpy(images_out + row * sample, ds_->images.data() + idx * sample, row_bytes);
    if (labels_out != nullptr) labels_out[row] = ds_->labels[static_cast<size_t>(idx)];
  }
  if (filled != nullptr) *filled = real;
  ++next_batch_;
  return true;
}

}  // namespace trident::data
