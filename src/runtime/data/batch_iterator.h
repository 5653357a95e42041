// Epoch-wise mini-batch iteration over an in-memory Dataset, copying straight into the caller's
// (an executable's) fixed-size input buffers. Shuffling is a portable Fisher-Yates driven by
// std::mt19937_64 seeded from (seed, epoch), so orders are identical on every standard library.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/data/batch_source.h"
#include "runtime/data/dataset.h"

namespace trident::data {

// Compiled executables have a fixed batch size, so every batch handed out is full:
//  - training: use drop_last = true; the final partial batch of an epoch is skipped (a new
//    shuffle each epoch means every sample still gets used over time);
//  - evaluation: use drop_last = false; the final partial batch is padded up to the batch size
//    by repeating its real samples cyclically, and `filled` reports how many rows are real, so
//    metrics must count only the first `filled` rows.
// The iterator refers to the dataset, which must outlive it and not change meanwhile.
class BatchIterator final : public BatchSource {
 public:
  // Throws trident::Error for batch < 1, an inconsistent or empty dataset, or drop_last with a
  // batch larger than the dataset (no batch at all). Starts epoch 0.
  BatchIterator(const Dataset& ds, int64_t batch, bool shuffle, uint64_t seed, bool drop_last);
  // The dataset is referred to, not copied: a temporary would dangle.
  BatchIterator(Dataset&&, int64_t, bool, uint64_t, bool) = delete;

  int64_t batch() const override { return batch_; }
  int64_t batches_per_epoch() const override;
  int64_t epoch() const { return epoch_; }
  // The sample order of the current epoch (a permutation of [0, count)).
  const std::vector<int64_t>& order() const { return order_; }

  // Rewinds to the first batch; with shuffle, the order is a deterministic function of
  // (seed, epoch), else the dataset order.
  void start_epoch(int64_t epoch) override;

  // Copies the next batch: batch * sample_size floats into images_out (NHWC) and batch labels
  // into labels_out (may be null to skip labels). `filled`, when given, receives the number of
  // real samples (< batch only for the padded last batch). Returns false, copying nothing, once
  // the epoch is exhausted.
  bool next(float* images_out, int32_t* labels_out, int64_t* filled = nullptr) override;

 private:
  const Dataset* ds_;
  int64_t batch_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t next_batch_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace trident::data
