// ShardedBatches: rank r of n reads rows [r·B, (r+1)·B) of each global batch, so the ranks
// together read exactly the global batches of one process of batch n·B, in the same shuffled
// order; the padded evaluation batch splits its real rows over the ranks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runtime/data/batch_iterator.h"
#include "runtime/data/sharded_batches.h"
#include "support/error_of.h"

using namespace trident;
using namespace trident::data;

namespace {

// count samples of 1x1x1 whose pixel is the sample's index, label index % 7.
Dataset indexed(int64_t count) {
  Dataset ds;
  ds.count = count;
  ds.height = ds.width = ds.channels = 1;
  ds.num_classes = 7;
  for (int64_t i = 0; i < count; ++i) {
    ds.images.push_back(static_cast<float>(i));
    ds.labels.push_back(static_cast<int32_t>(i % 7));
  }
  return ds;
}

ShardedBatches shard(const Dataset& ds, int64_t global, int rank, int ranks, bool train) {
  return ShardedBatches(std::make_unique<BatchIterator>(ds, global, train, 3, train), rank, ranks, 1);
}

}  // namespace

TEST(ShardedBatches, RanksTogetherReadTheGlobalBatchesInOrder) {
  const Dataset ds = indexed(50);
  BatchIterator whole(ds, 12, true, 3, true);
  std::vector<ShardedBatches> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(shard(ds, 12, r, 3, true));
  for (int64_t epoch : {0, 1}) {
    whole.start_epoch(epoch);
    for (auto& r : ranks) r.start_epoch(epoch);
    std::vector<float> global(12), part(4);
    std::vector<int32_t> global_labels(12), part_labels(4);
    int batches = 0;
    while (whole.next(global.data(), global_labels.data())) {
      ++batches;
      for (int r = 0; r < 3; ++r) {
        ASSERT_TRUE(ranks[r].next(part.data(), part_labels.data()));
        for (int i = 0; i < 4; ++i) {
          EXPECT_EQ(part[i], global[r * 4 + i]) << "epoch " << epoch << " rank " << r;
          EXPECT_EQ(part_labels[i], global_labels[r * 4 + i]);
        }
      }
    }
    EXPECT_EQ(batches, 4);
    for (auto& r : ranks) EXPECT_FALSE(r.next(part.data(), part_labels.data()));
    EXPECT_EQ(ranks[0].batches_per_epoch(), 4);
    EXPECT_EQ(ranks[0].batch(), 4);
  }
}

TEST(ShardedBatches, ThePaddedLastBatchCountsEachRealRowOnce) {
  const Dataset ds = indexed(10);  // global batch 8: a full batch, then 2 real rows of 8
  std::vector<float> part(4);
  int64_t real = 0;
  for (int r = 0; r < 2; ++r) {
    ShardedBatches s = shard(ds, 8, r, 2, false);
    int64_t filled = -1;
    while (s.next(part.data(), nullptr, &filled)) real += filled;
  }
  EXPECT_EQ(real, 10);
  ShardedBatches second = shard(ds, 8, 1, 2, false);
  int64_t filled = -1;
  ASSERT_TRUE(second.next(part.data(), nullptr, &filled));
  ASSERT_TRUE(second.next(part.data(), nullptr, &filled));
  EXPECT_EQ(filled, 0);  // rows 8 and 9 are rank 0's
}

TEST(ShardedBatches, AGlobalBatchThatDoesNotSplitIsRefused) {
  const Dataset ds = indexed(20);
  EXPECT_NE(test_support::error_of([&] { shard(ds, 10, 0, 3, true); }).find("does not split into 3 equal shares"),
            std::string::npos);
}
