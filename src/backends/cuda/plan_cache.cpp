// The cuda backend's persisted plan choices (plan_cache.h) in core/plan_cache_store.h's files.
#include "backends/cuda/plan_cache.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include "backends/cuda/cuda_context.h"
#include "core/plan_cache_store.h"

namespace trident::cuda {

namespace {

PlanCacheStore& store() {
  static PlanCacheStore s("cuda", "trident cuda plans 1");
  return s;
}

const std::string& cache_dir(const CudaContext& ctx) { return ctx.kernel_options().backend.plan_cache_dir; }

}  // namespace

std::string plan_cache_machine(const CudaContext& ctx) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  return "gpu " + ctx.device_name() + "; sm" + std::to_string(ctx.compute_capability()) + "; driver " +
         std::to_string(driver) + "; cudnn " + std::to_string(cudnnGetVersion());
}

std::optional<PlanChoice> cached_plan(const CudaContext& ctx, const std::string& key) {
  return store().find(cache_dir(ctx), plan_cache_machine(ctx), key);
}

void store_plan(const CudaContext& ctx, const std::string& key, const PlanChoice& plan) {
  store().store(cache_dir(ctx), plan_cache_machine(ctx), key, plan);
}

std::string plan_cache_path(const CudaContext& ctx, const std::string& dir) {
  return store().path(dir, plan_cache_machine(ctx));
}

}  // namespace trident::cuda
