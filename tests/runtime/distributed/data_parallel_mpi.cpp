// Data-parallel training checked across processes: this binary runs under `mpirun -np 2`
// (tests/CMakeLists.txt), every rank running every case. Without BN statistics in the way, two
// ranks of batch B/2 must train the same parameters as one process of batch B; with them, the
// averaged gradient must equal the mean of the two ranks' gradients computed one by one, and
// with sync-BN the ranks must again train what one process of batch B trains. Each
// rank computes the single-process references itself, so a broken collective cannot hide
// behind itself. The host backends run every case; the cuda backend (NCCL) runs the two
// equivalences where every rank of the machine has a GPU of its own, and says why it skips
// elsewhere (NCCL refuses two ranks on one GPU).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "backends/kernel.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "runtime/data/batch_iterator.h"
#include "runtime/data/sharded_batches.h"
#include "runtime/distributed/world.h"
#include "runtime/executable.h"
#include "runtime/trainer.h"
#include "support/graph_queries.h"
#include "support/tolerance.h"

#ifdef TRIDENT_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstdlib>

#include "backends/cuda/cuda_context.h"
#endif

using namespace trident;
using test_support::count_op;

namespace {

constexpr int64_t kHalf = 4, kSide = 8, kChannels = 3, kClasses = 5;

std::shared_ptr<distributed::World> world() {
  static std::shared_ptr<distributed::World> w = distributed::join_world();
  return w;
}

#define REQUIRE_RANKS(n)                                                                   \
  if (!world() || world()->size() != (n)) GTEST_SKIP() << "needs mpirun -np " << (n) << " (this run has " \
                                                       << (world() ? world()->size() : 1) << " processes)"
#define REQUIRE_TWO_RANKS() REQUIRE_RANKS(2)

std::vector<std::string> host_backends() {
  std::vector<std::string> out{"cpu_ref"};
  if (KernelRegistry::has("cpu", "conv2d")) out.push_back("cpu");
  return out;
}

// Empty when every rank on this machine has a GPU of its own; else why the cuda cases skip.
std::string gpu_per_rank_missing() {
#ifdef TRIDENT_HAVE_CUDA
  // Strict fp32 (no TF32), so the f32 tolerance holds; read when the first handle is made.
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  std::string why;
  if (!cuda::gpu_available(&why)) return why;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return "the GPUs could not be counted";
  if (n < world()->local_size())
    return std::to_string(n) + " GPU(s) for " + std::to_string(world()->local_size()) +
           " ranks on this machine; NCCL needs one GPU per rank";
  return {};
#else
  return "this build has no cuda backend";
#endif
}

#define REQUIRE_GPU_PER_RANK()                                                   \
  do {                                                                           \
    const std::string trident_gpu_why = gpu_per_rank_missing();                  \
    if (!trident_gpu_why.empty()) GTEST_SKIP() << "needs a GPU per rank: " << trident_gpu_why; \
  } while (0)

// conv → bn → relu (a cbr once fused) → max-pool → linear: BN makes a rank's gradient depend on
// its whole batch, so only the gradient mean is comparable.
ir::Graph bn_network(int64_t batch) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, kSide, kSide, kChannels});
  x = b.relu(b.batchnorm(b.conv(x, 8, 3, 1, 1, {}, "conv1"), "bn1"), "relu1");
  g.mark_output(b.linear(b.flatten(b.maxpool(x, 2, 2)), kClasses, true, "fc"));
  return g;
}

// The same without BN: every sample's gradient is its own, so the batch splits exactly.
ir::Graph plain_network(int64_t batch) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, kSide, kSide, kChannels});
  x = b.relu(b.conv(x, 8, 3, 1, 1, {.bias = true}, "conv1"), "relu1");
  x = b.relu(b.conv(x, 8, 3, 2, 1, {.bias = true}, "conv2"), "relu2");
  g.mark_output(b.linear(b.flatten(x), kClasses, true, "fc"));
  return g;
}

// Two batchnorms, the second fed by the first through a convolution: sync-BN's backward sums
// reach the first one's dx only if the second's dx was global.
ir::Graph two_bn_network(int64_t batch) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = b.input("images", {batch, kSide, kSide, kChannels});
  x = b.relu(b.batchnorm(b.conv(x, 8, 3, 1, 1, {}, "conv1"), "bn1"), "relu1");
  x = b.relu(b.batchnorm(b.conv(x, 8, 3, 2, 1, {}, "conv2"), "bn2"), "relu2");
  g.mark_output(b.linear(b.flatten(x), kClasses, true, "fc"));
  return g;
}

data::Dataset dataset(int64_t count) {
  data::Dataset ds;
  ds.count = count;
  ds.height = ds.width = kSide;
  ds.channels = kChannels;
  ds.num_classes = kClasses;
  Rng rng(11);
  ds.images.resize(static_cast<size_t>(count * ds.sample_size()));
  for (float& v : ds.images) v = static_cast<float>(rng.uniform(-1, 1));
  for (int64_t i = 0; i < count; ++i) ds.labels.push_back(static_cast<int32_t>((i * 7) % kClasses));
  return ds;
}

// Rows [first, first + rows) of `ds` into the executable's inputs.
void feed(runtime::Executable& exe, const data::Dataset& ds, int64_t first, int64_t rows) {
  TensorView images = exe.find("images"), labels = exe.find("labels");
  std::copy_n(ds.images.data() + first * ds.sample_size(), rows * ds.sample_size(), images.as<float>());
  std::copy_n(ds.labels.data() + first, rows, labels.as<int32_t>());
}

std::vector<std::vector<float>> gradients(const runtime::Executable& exe) {
  std::vector<std::vector<float>> out;
  for (auto [p, gp] : exe.param_grads()) {
    const TensorView v = exe.view(gp);
    out.emplace_back(v.as<float>(), v.as<float>() + v.numel());
  }
  return out;
}

std::vector<float> floats(const HostTensor& t) {
  EXPECT_EQ(t.dtype, DType::f32);
  std::vector<float> out(t.data.size() / sizeof(float));
  std::memcpy(out.data(), t.data.data(), out.size() * sizeof(float));
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what, bool exact,
                  test_support::Tolerance tol = test_support::tolerance(DType::f32)) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  test_support::expect_each(
      got.size(),
      [&](size_t i) { return exact ? got[i] == ref[i] : std::abs(got[i] - ref[i]) <= tol.atol + tol.rtol * std::abs(ref[i]); },
      [&](size_t i) { return test_support::cat(what, "[", i, "]: got ", got[i], " vs reference ", ref[i]); });
}

// Plain SGD at learning rate 0.1 for one epoch on `backend`, in one process.
runtime::TrainConfig one_epoch_of_sgd(const std::string& backend) {
  runtime::TrainConfig cfg;
  cfg.compile.backend = backend;
  cfg.lr = 0.1;
  cfg.epochs = 1;
  return cfg;
}

// One epoch over this rank's half of every shuffled (seed 5) global batch of 2·kHalf.
runtime::EpochStats train_my_shard(runtime::Trainer& t, const data::Dataset& ds) {
  data::ShardedBatches shard(std::make_unique<data::BatchIterator>(ds, 2 * kHalf, true, 5, true),
                             world()->rank(), 2, ds.sample_size());
  return t.train_epoch(shard, 0, 1);
}

TEST(DataParallel, AveragedGradientIsTheMeanOfTheRanksGradients) {
  REQUIRE_TWO_RANKS();
  const data::Dataset ds = dataset(2 * kHalf);
  for (const std::string& backend : host_backends()) {
    SCOPED_TRACE(backend);
    passes::CompileOptions o = runtime::default_compile_options(passes::Mode::Train);
    o.backend = backend;
    o.optimizer = false;
    passes::CompileOptions distributed_options = o;
    distributed_options.distributed = true;
    distributed_options.world_size = 2;
    BackendOptions with_world;
    with_world.world = world();
    auto exe = runtime::Executable::compile(bn_network(kHalf), distributed_options, with_world);
    ASSERT_GE(count_op(exe->graph(), "allreduce_mean"), 1);
    exe->init_parameters(7);
    feed(*exe, ds, world()->rank() * kHalf, kHalf);
    exe->run();
    const auto averaged = gradients(*exe);

    // Both shards one after the other in one process, with a plan that has no collective.
    auto alone = runtime::Executable::compile(bn_network(kHalf), o, BackendOptions{});
    ASSERT_EQ(count_op(alone->graph(), "allreduce_mean"), 0);
    alone->init_parameters(7);
    std::vector<std::vector<float>> shard[2];
    for (int r = 0; r < 2; ++r) {
      feed(*alone, ds, r * kHalf, kHalf);
      alone->run();
      shard[r] = gradients(*alone);
    }
    ASSERT_EQ(averaged.size(), shard[0].size());
    for (size_t t = 0; t < averaged.size(); ++t) {
      std::vector<float> mean(shard[0][t].size());
      for (size_t i = 0; i < mean.size(); ++i) mean[i] = (shard[0][t][i] + shard[1][t][i]) / 2.0f;
      // The collective adds the same two floats and divides by two: the same bits on cpu_ref.
      expect_close(averaged[t], mean, exe->graph().value(exe->param_grads()[t].first).name, backend == "cpu_ref");
    }
  }
}

// Two ranks of batch kHalf against one process of 2·kHalf on `backend`: the loss, accuracy
// and parameters after an epoch, then the sharded evaluation.
void expect_two_ranks_train_the_global_batch(const std::string& backend) {
  const data::Dataset ds = dataset(7 * kHalf + 3);  // 3 steps of 8; evaluation ends in a partial batch
  const runtime::TrainConfig cfg = one_epoch_of_sgd(backend);
  runtime::TrainConfig ranked = cfg;
  ranked.backend_options.world = world();
  // Small buckets, so the gradients go in several allreduce calls.
  ranked.compile.allreduce_bucket_bytes = 2048;

  runtime::Trainer mine(plain_network(kHalf), ranked);
  EXPECT_GE(count_op(mine.train_executable().graph(), "allreduce_mean"), 2);
  EXPECT_EQ(mine.global_batch(), 2 * kHalf);
  const runtime::EpochStats st = train_my_shard(mine, ds);

  runtime::Trainer alone(plain_network(2 * kHalf), cfg);
  data::BatchIterator all(ds, 2 * kHalf, true, 5, true);
  const runtime::EpochStats ref = alone.train_epoch(all, 0, 1);

  EXPECT_EQ(mine.step(), 3);
  EXPECT_EQ(alone.step(), 3);
  EXPECT_NEAR(st.loss, ref.loss, 1e-5 * std::abs(ref.loss));
  EXPECT_DOUBLE_EQ(st.accuracy, ref.accuracy);
  const runtime::WeightMap got = mine.train_executable().export_weights(),
                           want = alone.train_executable().export_weights();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, tensor] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    expect_close(floats(got.at(name)), floats(tensor), name, false);
  }

  // Evaluation: each rank its shard, counts summed over both.
  const runtime::EvalStats ev = mine.evaluate(ds), ev_ref = alone.evaluate(ds);
  EXPECT_EQ(ev.samples, ds.count);
  EXPECT_EQ(ev.samples, ev_ref.samples);
  EXPECT_DOUBLE_EQ(ev.accuracy, ev_ref.accuracy);
  EXPECT_NEAR(ev.loss, ev_ref.loss, 1e-5 * std::abs(ev_ref.loss));
}

TEST(DataParallel, TwoRanksTrainTheParametersOfOneProcessOfTheGlobalBatch) {
  REQUIRE_TWO_RANKS();
  for (const std::string& backend : host_backends()) {
    SCOPED_TRACE(backend);
    expect_two_ranks_train_the_global_batch(backend);
  }
}

TEST(DataParallel, TwoGpusTrainTheParametersOfOneProcessOfTheGlobalBatch) {
  REQUIRE_TWO_RANKS();
  REQUIRE_GPU_PER_RANK();
  expect_two_ranks_train_the_global_batch("cuda");
}

// Sync-BN: two ranks of batch 4 train three SGD steps of a network with two batchnorms and
// must end with the parameters, momentum and running statistics of one process of batch 8,
// within the f32 tolerance: not bit for bit, since the weight gradients sum the batch in f32 in
// one pass alone but as two halves averaged here (as in the case above), and the statistics'
// double sums associate rank by rank instead of row by row. On cpu_ref, where every other sum
// has a fixed order, the running statistics are held to 1e-5 relative (3 steps differ by about
// 3e-6).
// Without sync-BN the same run must miss the running statistics, or this test proves nothing.
void expect_sync_bn_trains_the_global_batch(const std::string& backend) {
  const data::Dataset ds = dataset(6 * kHalf);  // 3 steps of 8
  const runtime::TrainConfig cfg = one_epoch_of_sgd(backend);
  runtime::Trainer alone(two_bn_network(2 * kHalf), cfg);
  data::BatchIterator all(ds, 2 * kHalf, true, 5, true);
  const runtime::EpochStats ref = alone.train_epoch(all, 0, 1);
  const runtime::WeightMap want = alone.train_executable().export_weights();

  for (const bool sync : {true, false}) {
    SCOPED_TRACE(sync ? "sync-BN" : "per-rank BN");
    runtime::TrainConfig ranked = cfg;
    ranked.backend_options.world = world();
    ranked.backend_options.sync_batchnorm = sync;
    runtime::Trainer mine(two_bn_network(kHalf), ranked);
    const runtime::EpochStats st = train_my_shard(mine, ds);
    ASSERT_EQ(mine.step(), 3);
    const runtime::WeightMap got = mine.train_executable().export_weights();
    ASSERT_EQ(got.size(), want.size());
    if (!sync) {
      double worst = 0;  // the largest relative difference of a running statistic
      for (const auto& [name, tensor] : want) {
        if (name.find("running_") == std::string::npos) continue;
        const std::vector<float> a = floats(got.at(name)), b = floats(tensor);
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (1e-3 + std::abs(b[i])));
      }
      EXPECT_GT(worst, 1e-3) << "per-rank statistics matched the global batch's: the sync-BN case is not sensitive";
      continue;
    }
    EXPECT_NEAR(st.loss, ref.loss, 1e-5 * std::abs(ref.loss));
    EXPECT_DOUBLE_EQ(st.accuracy, ref.accuracy);
    int statistics = 0;
    for (const auto& [name, tensor] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      const bool statistic = name.find("running_") != std::string::npos;
      statistics += statistic;
      const bool tight = statistic && backend == "cpu_ref";
      expect_close(floats(got.at(name)), floats(tensor), name, false,
                   tight ? test_support::Tolerance{1e-7, 1e-5} : test_support::tolerance(DType::f32));
    }
    EXPECT_EQ(statistics, 4);  // running mean and variance of bn1 and bn2
  }
}

TEST(DataParallel, SyncBnTwoRanksTrainWhatOneProcessOfTheGlobalBatchTrains) {
  REQUIRE_TWO_RANKS();
  for (const std::string& backend : host_backends()) {
    SCOPED_TRACE(backend);
    expect_sync_bn_trains_the_global_batch(backend);
  }
}

// The same on two GPUs: NCCL sums the statistics of the fused cbr and of its backward.
TEST(DataParallel, SyncBnTwoGpusTrainWhatOneProcessOfTheGlobalBatchTrains) {
  REQUIRE_TWO_RANKS();
  REQUIRE_GPU_PER_RANK();
  expect_sync_bn_trains_the_global_batch("cuda");
}

// Without sync-BN each rank's running statistics are its own shard's; evaluation (and the CLI,
// before a checkpoint) first replaces them on every rank by their mean over the ranks, so both
// ranks evaluate, and rank 0 saves, the same network. The statistics must have differed, or the
// case proves nothing.
TEST(DataParallel, RunningStatisticsAreTheRanksMeanBeforeEvaluation) {
  REQUIRE_TWO_RANKS();
  const data::Dataset ds = dataset(6 * kHalf);
  for (const std::string& backend : host_backends()) {
    SCOPED_TRACE(backend);
    runtime::TrainConfig ranked = one_epoch_of_sgd(backend);
    ranked.backend_options.world = world();
    runtime::Trainer mine(two_bn_network(kHalf), ranked);
    train_my_shard(mine, ds);
    runtime::Executable& exe = mine.train_executable();
    const std::vector<int> stats = exe.running_statistics();
    ASSERT_EQ(stats.size(), 4u);  // running mean and variance of bn1 and bn2
    std::vector<float> own, other;
    for (int v : stats) {
      const TensorView t = exe.view(v);
      own.insert(own.end(), t.as<float>(), t.as<float>() + t.numel());
    }
    other = own;  // rank r's statistics travel to rank 1 - r: the sum minus one's own
    std::vector<float> sum = own;
    world()->sum(sum.data(), sum.size());
    for (size_t i = 0; i < other.size(); ++i) other[i] = sum[i] - own[i];
    double spread = 0;
    for (size_t i = 0; i < own.size(); ++i) spread = std::max(spread, std::abs(double(own[i]) - other[i]));
    EXPECT_GT(spread, 1e-4) << "the ranks' statistics were equal before averaging";

    data::BatchIterator eval_batches(ds, kHalf, false, 0, false);
    mine.evaluate(eval_batches);
    std::vector<float> after;
    for (int v : stats) {
      const TensorView t = exe.view(v);
      after.insert(after.end(), t.as<float>(), t.as<float>() + t.numel());
    }
    std::vector<float> mean(own.size());
    for (size_t i = 0; i < own.size(); ++i) mean[i] = static_cast<float>((double(own[i]) + other[i]) / 2);
    expect_close(after, mean, "running statistics after evaluation", false, test_support::Tolerance{1e-7, 1e-6});
    std::vector<float> both = after;  // the same bits on both ranks: the sum is twice one's own
    world()->sum(both.data(), both.size());
    for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(both[i], 2 * after[i]) << i;
  }
}

// --bn-group: four ranks in sync-BN groups of two ({0, 1} and {2, 3}, rank / 2). A split world's
// collectives join only its group; trained with sync-BN in groups, the two ranks of a group hold
// the same running statistics (bit for bit: the same global sums), and the groups, which saw
// different rows, hold different ones. Run by its own ctest under `mpirun -np 4`.
TEST(DataParallelGroups, ASplitWorldSumsOnlyItsGroup) {
  REQUIRE_RANKS(4);
  const std::shared_ptr<distributed::World> part = world()->split(world()->rank() / 2);
  EXPECT_EQ(part->size(), 2);
  EXPECT_EQ(part->rank(), world()->rank() % 2);
  double v = world()->rank();
  part->sum(&v, 1);
  EXPECT_EQ(v, world()->rank() / 2 * 4 + 1);  // 0 + 1, 2 + 3
}

TEST(DataParallelGroups, SyncBnInGroupsOfTwoAgreesWithinAGroupAndNotAcross) {
  REQUIRE_RANKS(4);
  const data::Dataset ds = dataset(12 * kHalf);  // 3 steps of 4·kHalf
  for (const std::string& backend : host_backends()) {
    SCOPED_TRACE(backend);
    runtime::TrainConfig cfg = one_epoch_of_sgd(backend);
    cfg.backend_options.world = world();
    cfg.backend_options.sync_batchnorm = true;
    cfg.backend_options.batchnorm_group_size = 2;
    runtime::Trainer mine(two_bn_network(kHalf), cfg);
    ASSERT_TRUE(mine.config().backend_options.batchnorm_group);
    data::ShardedBatches shard(std::make_unique<data::BatchIterator>(ds, 4 * kHalf, true, 5, true), world()->rank(), 4,
                               ds.sample_size());
    mine.train_epoch(shard, 0, 1);
    std::vector<float> own;
    for (int v : mine.train_executable().running_statistics()) {
      const TensorView t = mine.train_executable().view(v);
      own.insert(own.end(), t.as<float>(), t.as<float>() + t.numel());
    }
    ASSERT_FALSE(own.empty());
    std::vector<float> group = own, all = own;
    mine.config().backend_options.batchnorm_group->sum(group.data(), group.size());
    world()->sum(all.data(), all.size());
    double across = 0;
    for (size_t i = 0; i < own.size(); ++i) {
      EXPECT_EQ(group[i], 2 * own[i]) << "the two ranks of a group differ at " << i;
      across = std::max(across, std::abs(double(all[i]) - 2.0 * group[i]) / 2);  // |other group − this group|
    }
    EXPECT_GT(across, 1e-4) << "both groups hold the same statistics: the groups were not apart";
  }
}

}  // namespace
