// Who reads each value of a graph: the nodes that take it as an input, and how often it is one of
// the graph's outputs (the caller reads those after the run, so an output counts as a reader).
// Every fusion asks "is this value read anywhere but here?" before it rewires a chain; this is
// the one place that question is answered. A snapshot: a pass that rewires the graph builds a
// fresh one before its next candidate.
#pragma once

#include <cstddef>
#include <vector>

#include "ir/graph.h"

namespace trident::passes {

class ValueUses {
 public:
  explicit ValueUses(const ir::Graph& g) : readers_(g.users()), output_count_(g.num_values(), 0) {
    for (int v : g.outputs()) ++output_count_[v];
  }

  // The nodes that read `v`, in execution order, each once.
  const std::vector<int>& readers(int v) const { return readers_[v]; }
  bool is_output(int v) const { return output_count_[v] > 0; }
  // Readers plus each time `v` is a graph output: the "consumers" of the refusal sentences.
  size_t consumers(int v) const { return readers_[v].size() + output_count_[v]; }
  // `v`'s one reader when a single node reads it and it is no graph output; else -1.
  int only_reader(int v) const { return consumers(v) == 1 && readers_[v].size() == 1 ? readers_[v][0] : -1; }

 private:
  std::vector<std::vector<int>> readers_;
  std::vector<int> output_count_;
};

}  // namespace trident::passes
