// The cuda backend's timed choices that outlive the process, as TensorRT keeps a timing cache:
// for each cuDNN graph it tunes (cudnn_graphs.h), the index and name of the plan that timing
// chose, so the next compile of the same graph on the same GPU, driver and cuDNN builds that one
// plan untimed instead of building and timing up to eight. The files are core/plan_cache_store.h's
// ("cuda-<checksum>.plans" under BackendOptions::plan_cache_dir), one per GPU model, driver and
// library; a cached plan whose name no longer matches what cuDNN proposes at that index is timed
// again and replaced. Beside the choices, each tuned graph's chosen plan is kept whole, serialized
// with its runtime-compiled kernels (core/plan_blob_file.h), so the next compile loads it instead
// of building it: building is most of a compile's time, not timing.
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

// Whether `ctx` keeps a plan cache (BackendOptions::plan_cache_dir).
bool has_plan_cache(const CudaContext& ctx);

// The serialized plan (CudnnGraph::serialized()) `ctx`'s cache directory holds under `key`, if
// any; a damaged file is reported on stderr once, and rewritten by the next store.
std::optional<std::string> cached_plan_blob(const CudaContext& ctx, const std::string& key);

// Stores a serialized plan under `key` in `ctx`'s cache directory, if it has one.
void store_plan_blob(const CudaContext& ctx, const std::string& key, const std::string& payload);

// A choice's note: the plan's name and the time it was chosen with ("eng48 0.4120 ms"). The
// kernels that compare a graph with other paths read that time from a cached plan too, so a
// compile from the cache chooses as the compile that timed it did.
std::string plan_note(const std::string& name, float ms);
// The name and time of a note plan_note wrote; false for anything else.
bool parse_plan_note(const std::string& note, std::string& name, float& ms);

// The cache file for `ctx`'s GPU under `dir`.
std::string plan_cache_path(const CudaContext& ctx, const std::string& dir);

}  // namespace trident::cuda
