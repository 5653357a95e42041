// Sync-BN's collective on the GPU (batchnorm_rank_sum.h).
#include "backends/cuda/batchnorm_rank_sum.h"

#include "backends/cuda/cuda_check.h"
#include "core/error.h"
#include "core/world.h"

namespace trident::cuda {

std::unique_ptr<BatchnormRankSum> BatchnormRankSum::make(const ir::Node& node, bool training, CudaContext& ctx) {
  distributed::World* world = training ? ctx.kernel_options().backend.batchnorm_world() : nullptr;
  if (!world) return nullptr;
  return std::unique_ptr<BatchnormRankSum>(new BatchnormRankSum(node, *world, ctx));
}

namespace {

// The events' key: the node's first output, negated so that it cannot meet the keys of the
// convolutions' side-stream forks, which are value ids (the one of a gradient this node writes).
int fork_key(const ir::Node& node) { return -1 - node.outputs.at(0); }

}  // namespace

BatchnormRankSum::BatchnormRankSum(const ir::Node& node, distributed::World& world, CudaContext& ctx)
    : ctx_(&ctx), node_(node.name), comm_(nccl_communicator(world, ctx.device())),
      fork_(ctx.stream_fork(fork_key(node))), ranks_(world.size()) {
  hook_.ranks = ranks_;
  hook_.sum = [this](const double* in, double* out, size_t count, cudaStream_t stream) {
    if (stream != ctx_->stream()) throw Error("sync-BN's sums must be enqueued on the main stream");
    enqueue({{in, out, count, ncclFloat64}});
  };
}

void BatchnormRankSum::sum_in_place(std::initializer_list<float*> spans, size_t count) const {
  std::vector<NcclCommunicator::SumSpan> parts;
  for (float* p : spans) parts.push_back({p, p, count, ncclFloat32});
  enqueue(parts);
}

void BatchnormRankSum::enqueue(const std::vector<NcclCommunicator::SumSpan>& spans) const {
  const cudaStream_t main = ctx_->stream(), side = ctx_->collective_stream();
  check(cudaEventRecord(fork_.fork, main), "forking sync-BN's sums onto the collective stream");
  check(cudaStreamWaitEvent(side, fork_.fork, 0), "forking sync-BN's sums onto the collective stream");
  try {
    comm_->sum(spans, side);
  } catch (const Error& e) {
    throw Error("node '" + node_ + "' (sync-BN): " + e.what());
  }
  check(cudaEventRecord(fork_.join, side), "marking the end of sync-BN's sums");
  check(cudaStreamWaitEvent(main, fork_.join, 0), "waiting for sync-BN's sums");
}

std::string BatchnormRankSum::describe() const {
  return "statistics summed over " + std::to_string(ranks_) + (ranks_ == 1 ? " rank" : " ranks") + " by " +
         NcclCommunicator::version();
}

}  // namespace trident::cuda
