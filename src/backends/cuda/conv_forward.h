// The forward convolution with its epilogue (bias, residual add, relu), shared by conv2d,
// conv2d_epilogue and cbr's fallback: one cuDNN graph when cuDNN fuses it, else the plain
// convolution graph followed by the per-channel epilogue kernel. Which path a kernel took is
// visible: fell_back() and path(), and a line on stderr under TRIDENT_VERBOSE.
#pragma once
#include <string>

#include "backends/cuda/conv_problem.h"
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/verbose.h"
#include "ir/graph.h"

namespace trident::cuda {

// Implemented by the kernels that may take a slower path than the fused one, so tests and
// tools can ask which one they got.
class ReportsPath {
 public:
  virtual ~ReportsPath() = default;
  virtual bool fell_back() const = 0;
  virtual std::string path() const = 0;
};

struct ConvEpilogue {
  bool bias = false;
  DType bias_dtype = DType::f32;
  bool residual = false;
  bool relu = false;
  float relu_max = 0;  // relu: > 0 clips there too (ReLU6)
  // y shares the residual's memory: the convolution must not write y before the add reads
  // the residual, so it goes to scratch first and the epilogue kernel does the rest.
  bool residual_in_place = false;
};

class ConvForward {
 public:
  // Builds (or finds in ctx's cache) the graphs and adds this convolution's scratch to `layout`.
  ConvForward(const ir::Node& node, const ConvProblem& problem, const ConvEpilogue& epilogue, CudaContext& ctx,
              WorkspaceLayout& layout);

  struct Pointers {
    const void* x = nullptr;
    const void* w = nullptr;
    const void* bias = nullptr;
    const void* residual = nullptr;
    void* y = nullptr;
  };
  // Enqueues the convolution on ctx.stream(); `workspace` is the base the layout was made for.
  void run(const Pointers& p, void* workspace, CudaContext& ctx) const;

  bool fell_back() const { return fell_back_; }
  const std::string& path() const { return path_; }
  // The cuDNN graph's tuned time (ms; 0 untimed), without the epilogue kernel of a fallback.
  float tuned_ms() const { return graph_->tuned_ms(); }

 private:
  ConvProblem problem_;
  ConvEpilogue epilogue_;
  std::shared_ptr<const CudnnGraph> graph_;  // fused, or the plain convolution when fell_back_
  bool fell_back_ = false;
  bool to_scratch_ = false;  // the convolution writes scratch, not y
  size_t cudnn_offset_ = 0, scratch_offset_ = 0;
  std::string path_;
};

}  // namespace trident::cuda
