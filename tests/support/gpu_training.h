// Test support for whole training steps on the cuda backend: compile a model with
// BackendOptions::deterministic (so two executables choose the same plans), train it a few
// steps from seeded parameters, images and labels, and return every parameter, momentum and
// running statistic as bytes, for tests that expect two such runs to agree bit for bit.
// `backend` may bring more options (a distributed world, CUDA graphs off); deterministic is
// always set. `recorded`, where given, says whether the steps ran as a recorded CUDA graph.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/random.h"
#include "runtime/executable.h"

namespace trident::test_support {

inline std::vector<std::vector<std::byte>> train_deterministic_on_gpu(const ir::Graph& model,
                                                                      const passes::CompileOptions& opt, int steps,
                                                                      int64_t classes, BackendOptions backend = {},
                                                                      bool* recorded = nullptr) {
  backend.deterministic = true;
  auto exe = runtime::Executable::compile(model, opt, backend);
  exe->init_parameters(5);
  Rng rng(3);
  for (const char* name : {"images", "labels", "lr"}) {
    const int id = exe->value_id(name);
    TensorView t = exe->host_view(id);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % classes);
      else if (std::string(name) == "lr") t.as<float>()[i] = 0.05f;
      else t.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe->upload(id);
  }
  for (int step = 0; step < steps; ++step) exe->run();
  if (recorded) *recorded = exe->context().has_recording();
  std::vector<std::vector<std::byte>> state;
  for (int v = 0; v < exe->graph().num_values(); ++v) {
    const ir::Value& val = exe->graph().value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    exe->download(v);
    const TensorView t = exe->host_view(v);
    const auto* p = static_cast<const std::byte*>(t.data);
    state.emplace_back(p, p + t.bytes());
  }
  return state;
}

// How many of the tensors of two trained states differ (they must hold the same tensors).
inline int differing_tensors(const std::vector<std::vector<std::byte>>& a, const std::vector<std::vector<std::byte>>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += a[i] != b[i];
  return n + static_cast<int>(a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

}  // namespace trident::test_support
