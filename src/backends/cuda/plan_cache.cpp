// The cuda backend's persisted plan choices and serialized plans (plan_cache.h) in
// core/plan_cache_store.h's and core/plan_blob_file.h's files.
#include "backends/cuda/plan_cache.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include "backends/cuda/cuda_context.h"
#include "core/plan_blob_file.h"
#include "core/plan_cache_store.h"

namespace trident::cuda {

namespace {

PlanCacheStore& store() {
  // Version 2: notes carry the chosen plan's time (version 1's, only its name, are timed again).
  static PlanCacheStore s("cuda", "trident cuda plans 2");
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

std::string plan_note(const std::string& name, float ms) {
  char time[32];
  std::snprintf(time, sizeof time, " %.4f ms", static_cast<double>(ms));
  return name + time;
}

bool parse_plan_note(const std::string& note, std::string& name, float& ms) {
  const size_t unit = note.rfind(" ms");
  if (unit == std::string::npos || unit + 3 != note.size()) return false;
  const size_t space = note.rfind(' ', unit - 1);
  if (space == std::string::npos || space == 0) return false;
  char* end = nullptr;
  const std::string number = note.substr(space + 1, unit - space - 1);
  ms = std::strtof(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(ms > 0.f) || !std::isfinite(ms)) return false;
  name = note.substr(0, space);
  return true;
}

bool has_plan_cache(const CudaContext& ctx) { return !cache_dir(ctx).empty(); }

std::optional<std::string> cached_plan_blob(const CudaContext& ctx, const std::string& key) {
  if (!has_plan_cache(ctx)) return std::nullopt;
  const std::string machine = plan_cache_machine(ctx);
  const std::string path = plan_blob_path(cache_dir(ctx), "cuda", machine, key);
  std::string problem;
  std::optional<std::string> payload = read_plan_blob(path, machine, key, problem);
  if (!problem.empty()) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(path).second)
      std::cerr << "trident: the plan cache's file '" << path << "' is not used: " << problem
                << "; its plan is built again and the file rewritten\n";
  }
  return payload;
}

void store_plan_blob(const CudaContext& ctx, const std::string& key, const std::string& payload) {
  if (!has_plan_cache(ctx)) return;
  const std::string machine = plan_cache_machine(ctx);
  write_plan_blob(plan_blob_path(cache_dir(ctx), "cuda", machine, key), machine, key, payload);
}

std::string plan_cache_path(const CudaContext& ctx, const std::string& dir) {
  return store().path(dir, plan_cache_machine(ctx));
}

}  // namespace trident::cuda
