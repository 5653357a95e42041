// One rank's share of a data-parallel run's batches: the inner source yields the global batch
// of world·B rows (the batches a single process of batch world·B would train on, in the same
// seeded order), and rank r takes rows [r·B, (r+1)·B) of each. So the global order, and the
// schedule's steps per epoch, do not depend on the world size. Evaluation batches are padded
// as usual; a rank's `filled` counts the real rows of its slice (0 when the last batch ends
// before it), so counts summed over ranks are the single-process ones. A source that can make
// only some rows of each batch (an image folder: BatchSource::keep_rows) makes only the rank's,
// so N ranks decode each image once between them, not N times.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/data/batch_source.h"

namespace trident::data {

class ShardedBatches final : public BatchSource {
 public:
  // `global` yields batches of ranks·B rows of `row_floats` floats each; Error when its batch
  // does not split evenly into `ranks` slices.
  ShardedBatches(std::unique_ptr<BatchSource> global, int rank, int ranks, int64_t row_floats);

  int64_t batch() const override { return batch_; }
  int64_t batches_per_epoch() const override { return global_->batches_per_epoch(); }
  void start_epoch(int64_t epoch) override { global_->start_epoch(epoch); }
  bool next(float* images_out, int32_t* labels_out, int64_t* filled = nullptr) override;
  // A source that makes this rank's rows alone hands its image files out as they are.
  bool can_hand_out_images() const override { return direct_ && global_->can_hand_out_images(); }
  void hand_out_images(bool on) override;
  bool next_images(const std::function<void(const ImageBatchRequest&, const HostRowMaker&)>& take, int32_t* labels_out,
                   int64_t* filled = nullptr) override;
  // And its pixels likewise.
  bool can_hand_out_pixels() const override { return direct_ && global_->can_hand_out_pixels(); }
  void hand_out_pixels(bool on) override;
  bool next_pixels(const std::function<void(const PixelBatch&)>& take, int32_t* labels_out,
                   int64_t* filled = nullptr) override;

 private:
  std::unique_ptr<BatchSource> global_;
  int rank_;
  int64_t batch_, row_floats_;
  bool direct_ = false;  // the source makes this rank's rows alone (BatchSource::keep_rows)
  std::vector<float> images_;
  std::vector<int32_t> labels_;
};

}  // namespace trident::data
