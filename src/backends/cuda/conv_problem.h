// One convolution as the cuda kernels see it: sizes and window read (and checked) from the
// node and its values, the cuDNN views of its NHWC/OHWI tensors, the graph descriptions of
// conv2d (with its fusable epilogues and batch statistics), dgrad and wgrad, and the layout of
// the per-kernel scratch inside the context's shared workspace.
#pragma once
#include <cstdint>
#include <string>

#include "backends/cuda/cudnn_graphs.h"
#include "backends/cuda/device/small_channel_conv.h"
#include "core/shape.h"
#include "ir/graph.h"

namespace trident::cuda {

// Uids of the tensors of the convolution graphs (pointers are bound by uid at execute time).
namespace conv_uid {
enum : int {
  x = 1, w = 2, bias = 3, residual = 4, y = 5, sum = 6, sq_sum = 7, dy = 8, dx = 9, dw = 10,
  x_scale = 11, x_shift = 12,  // the input prologue's per-channel affine (f32)
};
}

struct ConvProblem {
  int64_t N = 0, H = 0, W = 0, C = 0;  // input x (or dx), NHWC
  int64_t K = 0, R = 0, S = 0, Cg = 0;  // filter, OHWI [K,R,S,C/groups]
  int64_t P = 0, Q = 0;                 // output y (or dy) [N,P,Q,K]
  int64_t groups = 1;
  ConvWindow window;
  DType dtype = DType::f32;  // x, w and y

  int64_t output_rows() const { return N * P * Q; }
  size_t output_bytes() const { return static_cast<size_t>(output_rows() * K) * dtype_size(dtype); }

  // cuDNN views: activations as [N,C,H,W] with NHWC strides, the filter as [K,C/g,R,S] with
  // KRSC strides, per-channel tensors as [1,K,1,1].
  GraphTensor input(int uid) const;
  GraphTensor filter(int uid) const;
  GraphTensor output(int uid, DType t) const;
  GraphTensor per_channel(int uid, DType t) const;
  GraphTensor per_input_channel(int uid, DType t) const;  // [1,C,1,1]
  // "f16 x[8,32,32,3] w[16,3,3,3] stride 1,1 pad 1,1 dil 1,1 groups 1", for messages.
  std::string describe() const;
};

// Reads the window attributes of `node` and checks that x [N,H,W,C], w [K,R,S,C/g] and
// y [N,P,Q,K] agree with them; the shapes are the node's x/dx, weight and y/dy values.
// Throws an Error naming the node otherwise.
ConvProblem conv_problem(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y, DType dtype);

// The convolution as trident's small-channel kernels take it (device/small_channel_conv.h),
// and why they refuse it (empty: they take it) — its dtype, window and sizes included.
device::SmallConvShape small_conv_shape(const ConvProblem& p);
std::string small_conv_refusal(const ConvProblem& p, device::SmallConvKernel kernel);

// What a forward graph computes after the convolution.
// The input prologue of a convolution whose x is a raw convolution output (defer_bn_apply):
// it reads relu(x·scale + shift), scale and shift per input channel in `affine` (f32, or f16
// as cuDNN's ConvBNfprop/ConvBNwgrad engines on sm_90 take them), computed in f32 and handed
// to the convolution as `activated` (the io dtype, or f32).
struct InputPrologue {
  bool on = false;
  DType affine = DType::f32;
  DType activated = DType::f16;
};

struct FpropFusion {
  InputPrologue prologue;
  bool bias = false;
  DType bias_dtype = DType::f32;
  bool residual = false;
  bool relu = false;
  float relu_max = 0;     // relu: > 0 clips there too (ReLU6)
  bool genstats = false;  // per-channel Σ, Σ² (f32) of the output (bias included)

  bool any_epilogue() const { return bias || residual || relu; }
  std::string describe() const;  // "conv_fprop+bias+residual+relu"
};

// conv_fprop(x, w) [+ bias] [+ residual] [relu] → y (uid y) [and genstats → sum, sq_sum].
GraphDesc fprop_graph(const ConvProblem& p, const FpropFusion& f);
// conv_dgrad(dy, w) → dx.
GraphDesc dgrad_graph(const ConvProblem& p);
// conv_wgrad(x, dy) → dw, x through the prologue when it is on.
GraphDesc wgrad_graph(const ConvProblem& p, const InputPrologue& prologue = {});

// Carves one kernel's scratch regions out of the context's workspace (slot 0): offsets are
// fixed when the kernel is built, and the kernel reserves total() bytes.
class WorkspaceLayout {
 public:
  size_t add(size_t bytes) {
    const size_t offset = total_;
    total_ += (bytes + 255) / 256 * 256;
    return offset;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

template <class T = void>
T* at_offset(void* base, size_t offset) {
  return static_cast<T*>(static_cast<void*>(static_cast<char*>(base) + offset));
}

}  // namespace trident::cuda
