// The cuda backend's timed choices that outlive the process, as TensorRT keeps a timing cache:
// for each cuDNN graph it tunes (cudnn_graphs.h), the index and name of the plan that timing
// chose, so the next compile of the same graph on the same GPU, driver and cuDNN builds that one
// plan untimed instead of building and timing up to eight. The files are core/plan_cache_store.h's
// ("cuda-<checksum>.plans" under BackendOptions::plan_cache_dir), one per GPU model, driver and
// library; a cached plan whose name no longer matches what cuDNN proposes at that index is timed
// again and replaced.
#pragma once
#include <optional>
#include <string>

#include "core/plan_cache_file.h"

namespace trident::cuda {

class CudaContext;

// What the cache records the choices against: "gpu NVIDIA H200; sm90; driver 13000; cudnn 91900".
std::string plan_cache_machine(const CudaContext& ctx);

// The plan `ctx`'s cache directory holds under `key`, if any (no directory: none).
std::optional<PlanChoice> cached_plan(const CudaContext& ctx, const std::string& key);

// Stores `plan` under `key` in `ctx`'s cache directory, if it has one.
void store_plan(const CudaContext& ctx, const std::string& key, const PlanChoice& plan);

// The cache file for `ctx`'s GPU under `dir`.
std::string plan_cache_path(const CudaContext& ctx, const std::string& dir);

}  // namespace trident::cuda
