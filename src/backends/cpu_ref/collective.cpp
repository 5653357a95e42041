// allreduce_mean on the host backends (cpu_ref, and cpu, which registers the same kernels): sums
// each bucket over the ranks with the world's collective (MPI_Allreduce, which returns when it
// is done, so allreduce_wait has nothing to wait for), then divides by the world size — one correctly rounded division, exact for any power-of-two world. Tensors that
// lie back to back in the flat gradient buffer go in one call, so a bucket is one or a few calls.
#include <algorithm>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "backends/bucket_runs.h"

namespace trident::cpu_ref {

namespace {

class AllreduceMean final : public Kernel {
 public:
  AllreduceMean(const ir::Node& node, distributed::World* world) : world_(world) {
    const std::string problem = distributed::world_size_problem(world_, node.attrs.i("world_size"));
    if (!problem.empty()) throw Error("node '" + node.name + "' (allreduce_mean) " + problem);
  }
  void run(const KernelArgs& args) override {
    std::vector<std::pair<float*, size_t>> spans;  // (start, elements)
    for (size_t t = 0; t < args.out.size(); ++t) {
      const size_t n = static_cast<size_t>(args.out[t].numel());
      if (args.out[t].data != args.in[t].data) std::copy_n(args.in[t].as<float>(), n, args.out[t].as<float>());
      spans.push_back({args.out[t].as<float>(), n});
    }
    const float size = static_cast<float>(world_->size());
    for (const auto& run : distributed::contiguous_runs(std::move(spans))) {
      // Plain locals: clang before 16 cannot capture structured bindings in an OpenMP region.
      float* const start = run.first;
      const size_t count = run.second;
      world_->sum(start, count);
#pragma omp parallel for simd schedule(static)
      for (size_t k = 0; k < count; ++k) start[k] /= size;
    }
  }

 private:
  distributed::World* world_;
};

}  // namespace

std::unique_ptr<Kernel> make_allreduce_mean(const ir::Node& node, const ir::Graph&, BackendContext& ctx) {
  return std::make_unique<AllreduceMean>(node, ctx.kernel_options().backend.world.get());
}

std::unique_ptr<Kernel> make_allreduce_wait(const ir::Node&, const ir::Graph&, BackendContext&) {
  return make_fn_kernel([](const KernelArgs& args) {
    for (size_t t = 0; t < args.out.size(); ++t)
      if (args.out[t].data != args.in[t].data)
        std::copy_n(static_cast<const char*>(args.in[t].data), args.in[t].bytes(), static_cast<char*>(args.out[t].data));
  });
}

}  // namespace trident::cpu_ref
