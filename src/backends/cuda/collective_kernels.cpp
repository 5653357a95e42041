// allreduce_mean and allreduce_wait on the cuda backend: NCCL's all-reduce of each bucket of
// gradients on the context's collective stream, beside the rest of the backward on the main
// stream. allreduce_mean forks the collective stream from the main one (so the bucket's
// gradients are complete), enqueues the bucket as one group of ncclAllReduce(ncclAvg) calls over
// its runs of back-to-back tensors, and records the join event; allreduce_wait, right before
// the optimizer, makes the main stream wait for every bucket's join. Event fork and join are
// what CUDA graph capture records, so the step stays one graph with NCCL inside.
#include <algorithm>
#include <set>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/bucket_runs.h"

namespace trident::cuda {

namespace {

class AllreduceMeanKernel final : public Kernel {
 public:
  AllreduceMeanKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    if (node.inputs.empty() || node.inputs.size() != node.outputs.size())
      fail(node, "needs as many outputs as inputs, and at least one");
    for (size_t i = 0; i < node.inputs.size(); ++i) expect_dtype(node, input_value(node, g, i), DType::f32, "a gradient");
    distributed::World* world = ctx.kernel_options().backend.world.get();
    const std::string problem = distributed::world_size_problem(world, node.attrs.i("world_size"));
    if (!problem.empty()) fail(node, problem);
    comm_ = nccl_communicator(*world, ctx.device());
    fork_ = ctx.stream_fork(node.outputs[0]);
  }

  void run(const KernelArgs& a) override {
    std::vector<std::pair<float*, size_t>> spans;  // (start, elements)
    for (size_t t = 0; t < a.out.size(); ++t) {
      const size_t n = static_cast<size_t>(a.out[t].numel());
      if (a.out[t].data != a.in[t].data)
        check(cudaMemcpyAsync(a.out[t].data, a.in[t].data, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx_->stream()),
              "copying a gradient to its averaged place");
      spans.push_back({a.out[t].as<float>(), n});
    }
    const std::vector<std::pair<float*, size_t>> runs = distributed::contiguous_runs(std::move(spans));
    check(cudaEventRecord(fork_.fork, ctx_->stream()), "forking the all-reduce onto the collective stream");
    check(cudaStreamWaitEvent(ctx_->collective_stream(), fork_.fork, 0), "forking the all-reduce onto the collective stream");
    try {
      comm_->average(runs, ctx_->collective_stream());
    } catch (const Error& e) {
      fail(a.node, e.what());
    }
    check(cudaEventRecord(fork_.join, ctx_->collective_stream()), "marking the end of the all-reduce");
  }

  std::string implementation() const override { return NcclCommunicator::version() + " all-reduce on the collective stream"; }

 private:
  CudaContext* ctx_;
  std::shared_ptr<NcclCommunicator> comm_;
  CudaContext::StreamFork fork_;
};

class AllreduceWaitKernel final : public Kernel {
 public:
  AllreduceWaitKernel(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(&ctx) {
    if (node.inputs.empty() || node.inputs.size() != node.outputs.size())
      fail(node, "needs as many outputs as inputs, and at least one");
    std::set<int> started;  // the allreduce_mean nodes this one waits for
    for (int v : node.inputs) {
      const int p = g.value(v).producer;
      if (p < 0 || g.node(p).op != "allreduce_mean")
        fail(node, "input '" + g.value(v).name + "' does not come from an allreduce_mean");
      if (started.insert(p).second) joins_.push_back(ctx.stream_fork(g.node(p).outputs[0]).join);
    }
  }

  void run(const KernelArgs& a) override {
    for (cudaEvent_t join : joins_)
      check(cudaStreamWaitEvent(ctx_->stream(), join, 0), "waiting for the all-reduce of the gradients");
    for (size_t t = 0; t < a.out.size(); ++t)
      if (a.out[t].data != a.in[t].data)
        check(cudaMemcpyAsync(a.out[t].data, a.in[t].data, a.in[t].bytes(), cudaMemcpyDeviceToDevice, ctx_->stream()),
              "copying an averaged gradient");
  }

 private:
  CudaContext* ctx_;
  std::vector<cudaEvent_t> joins_;
};

}  // namespace

void register_collective_kernels() {
  add_kernel<AllreduceMeanKernel>("allreduce_mean");
  add_kernel<AllreduceWaitKernel>("allreduce_wait");
}

}  // namespace trident::cuda
