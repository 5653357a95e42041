// What fusion did to a model, for `trident explain`: the graph compiled with and without the
// fusion passes, side by side — nodes, kernel launches, intermediate bytes written per step —
// plus every fused group and every refused candidate with its reason, as text, JSON or DOT.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/executable.h"

namespace trident::runtime {

struct FusionReport {
  std::string model;
  passes::Mode mode = passes::Mode::Train;
  CompiledGraph fused, unfused;
  int64_t launches_fused = 0, launches_unfused = 0;
  int64_t bytes_fused = 0, bytes_unfused = 0;  // activation bytes written by kernels per step
};

// `options.disabled_passes` applies to the fused side; the unfused side also disables every
// fusion pass of the pipeline.
FusionReport explain(const std::string& model_name, const ir::Graph& model,
                     const passes::CompileOptions& options);

std::string report_text(const FusionReport& r);
nlohmann::json report_json(const FusionReport& r);
// Graphviz picture of the fused graph (fusion_dot.cpp): one edge per producer–consumer pair
// with its shape, optimizer and weight-cast fan-out as notes, one colour per fusion pattern
// with a legend.
std::string report_dot(const FusionReport& r);

// Kernels one step launches (views such as flatten and hoisted weight folding cost none) and
// the bytes its kernels write into activations.
int64_t kernel_launches(const ir::Graph& g, const plan::MemoryPlan& plan);
int64_t activation_bytes_written(const ir::Graph& g, const plan::MemoryPlan& plan);

}  // namespace trident::runtime
