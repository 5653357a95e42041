// Sync-BN on the GPU: the collective that sums a training batchnorm's per-channel statistics
// over the ranks of its group (BackendOptions::batchnorm_world) before the finalize — Σx, Σx² in
// the forward of batchnorm2d, bn_relu and the fused cbr/cbar/conv_bn_stats (genstats' output),
// Σdz, Σdz·(x − mean) in batchnorm2d_backward and batchnorm_relu_backward. One NCCL all-reduce
// per node, on the collective stream: forked from the main stream when the sums are written and
// joined back before the finalize reads them, so every collective of the world's communicator
// (the gradient buckets' too) runs on one stream in the order the plan issues them, the same
// on every rank, and the step stays one CUDA graph. A world of one rank takes this path as
// well (its sums are the identity), which is how one GPU tests it.
#pragma once
#include <initializer_list>
#include <memory>

#include "backends/cuda/cuda_context.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/nccl_communicator.h"
#include "ir/graph.h"

namespace trident::cuda {

class BatchnormRankSum {
 public:
  // The node's collective, or null when its statistics stay this rank's (no sync-BN, or an
  // inference batchnorm: pass training = false). Every rank makes it in the same order: the
  // first one of a world makes the world's NCCL communicator.
  static std::unique_ptr<BatchnormRankSum> make(const ir::Node& node, bool training, CudaContext& ctx);
  BatchnormRankSum(const BatchnormRankSum&) = delete;  // the device hook points at this object
  BatchnormRankSum& operator=(const BatchnormRankSum&) = delete;

  // Ranks whose rows the statistics span (the global row count is this rank's times it).
  int64_t ranks() const { return ranks_; }
  // Each span of `count` f32 sums replaced by its sum over the ranks, in stream order.
  void sum_in_place(std::initializer_list<float*> spans, size_t count) const;
  // The hook the batchnorm launchers call with their f64 totals (device/batchnorm.h).
  const device::RankSum& device_hook() const { return hook_; }
  // "sums its statistics over 8 ranks with NCCL 2.28.9", for a kernel's implementation().
  std::string describe() const;

 private:
  BatchnormRankSum(const ir::Node& node, distributed::World& world, CudaContext& ctx);
  void enqueue(const std::vector<NcclCommunicator::SumSpan>& spans) const;

  CudaContext* ctx_;
  std::string node_;
  std::shared_ptr<NcclCommunicator> comm_;
  CudaContext::StreamFork fork_;
  int64_t ranks_ = 1;
  device::RankSum hook_;
};

}  // namespace trident::cuda
