// Sync-BN outside a data-parallel job: in one process the batch is the global batch, so the
// option must train bit for bit what plain batchnorm trains (as PyTorch's SyncBatchNorm does in
// one process). The two-rank equivalence is in distributed/data_parallel_mpi.cpp; the cuda
// backend's NCCL path over a world of one rank is in tests/gpu/sync_batchnorm_test.cpp.
#include <gtest/gtest.h>

#include "backends/kernel.h"
#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/trainer.h"

using namespace trident;

namespace {

runtime::WeightMap trained(const std::string& backend, bool sync) {
  const data::Dataset ds = data::make_synthetic(32, 28, 28, 1, 10, 5);
  runtime::TrainConfig cfg;
  cfg.compile.backend = backend;
  cfg.lr = 0.05;
  cfg.epochs = 1;
  cfg.backend_options.sync_batchnorm = sync;
  runtime::Trainer t(frontend::build_model("fmnist_cnn", {8}), cfg);
  data::BatchIterator it(ds, 8, true, 3, true);
  t.train_epoch(it, 0, 1);
  return t.train_executable().export_weights();
}

}  // namespace

TEST(SyncBatchnorm, OneProcessTrainsThePlainBatchnormsBits) {
  std::vector<std::string> backends{"cpu_ref"};
  if (KernelRegistry::has("cpu", "conv2d")) backends.push_back("cpu");
  for (const std::string& backend : backends) {
    SCOPED_TRACE(backend);
    const runtime::WeightMap plain = trained(backend, false), synced = trained(backend, true);
    ASSERT_EQ(plain.size(), synced.size());
    for (const auto& [name, tensor] : plain) {
      ASSERT_TRUE(synced.count(name)) << name;
      EXPECT_TRUE(synced.at(name).data == tensor.data) << name << " differs";
    }
  }
}
