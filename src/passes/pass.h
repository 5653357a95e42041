// The compile pipeline: passes with one signature, run in order by the PassManager, which
// verifies the graph after each pass, can dump it, and skips passes the user disabled.
// CompileOptions holds only what the passes read.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "ir/graph.h"
#include "ops/backend_traits.h"
#include "passes/optimizer_kind.h"

namespace trident {
class MemoryBudget;
}

namespace trident::passes {

enum class Mode { Train, Infer };

// Inference in int8 (passes/quantize_int8.cpp). Calibrate: every convolution int8 could take
// keeps its input as a graph output, for runtime/int8_calibration.h to observe on the user's
// images. Quantize: each convolution whose input has a calibrated range becomes an int8
// conv2d_epilogue; the rest stay f32 with the reason. Both stages run the same passes before,
// so an input's value name is the same in both graphs.
struct Int8Options {
  enum class Stage { off, calibrate, quantize };
  struct Range {
    double threshold = 0;       // |x| above it saturates
    bool non_negative = false;  // no negative value seen: the u8 grid [0, threshold]
  };
  Stage stage = Stage::off;
  std::map<std::string, Range> ranges;  // by the name of the convolution's input value
};
std::string_view mode_name(Mode m);

struct CompileOptions {
  Mode mode = Mode::Train;
  // The backend the graph is compiled for: lowering asks the kernel registry for its kernels.
  // How that backend builds and runs them (timing, Winograd, CUDA graphs) is no pass's
  // business: BackendOptions (backends/backend_options.h).
  std::string backend = "cpu_ref";
  // What that backend states it runs and prefers (ops/backend_traits.h): the passes choose
  // their defaults and refusals by these, never by the backend's name. The runtime fills them
  // from the backend's declaration (runtime::with_backend_traits) before the pipeline runs.
  ops::BackendTraits traits;
  // Training: append an optimizer step to the graph. Off: parameter gradients become graph outputs.
  bool optimizer = true;
  OptimizerKind optimizer_kind = OptimizerKind::Sgd;
  double momentum = 0.9;       // SGD
  double weight_decay = 5e-4;  // SGD's L2 term in the gradient; AdamW's decoupled decay
  bool nesterov = false;       // SGD
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;  // AdamW
  // Training loss: cross-entropy against (1 − ε)·onehot + ε/K, PyTorch's label_smoothing = ε.
  double label_smoothing = 0;
  std::vector<std::string> disabled_passes;
  // Training as one rank of a distributed world of `world_size` ranks (runtime/distributed/
  // world.h; a job an MPI launcher started, even of one rank): every parameter gradient is
  // averaged over the ranks (allreduce_mean nodes, in buckets of about allreduce_bucket_bytes in
  // backward order, each as soon as its gradients are complete) before the optimizer reads it.
  bool distributed = false;
  int world_size = 1;
  int64_t allreduce_bucket_bytes = int64_t{25} << 20;
  std::string dump_dir;  // non-empty: write the graph after every pass as NN_<pass>.txt
  // The activations' dtype: f32, or f16/bf16 for mixed precision on the GPU (assign_precision
  // keeps parameters, BN statistics, the loss and the optimizer in f32).
  DType precision = DType::f32;
  // Inference: convolutions in int8 (the CPU backends), or the calibration run before it.
  Int8Options int8;
  // Dynamic loss scaling in training: -1 automatic (on for f16), 0 off, 1 on. The loss
  // gradient starts at the scale (state "amp.loss_scale"); the optimizer step unscales, skips a step
  // whose gradients overflowed and halves the scale, and doubles it after
  // `loss_scale_growth_interval` good steps.
  int loss_scaling = -1;
  double initial_loss_scale = 65536.0;
  int64_t loss_scale_growth_interval = 2000;
  // Zero-pad convolution inputs and weights whose channels do not fill 16-byte vectors (the
  // pad_channels pass): -1 automatic (the backend's default), 0 off, 1 on.
  int channel_padding = -1;
  // Where set, compile claims the plan's memory from this budget before allocating it and
  // the kernels' workspaces once they are built (core/memory_budget.h); null: no check.
  MemoryBudget* memory_budget = nullptr;
  bool pads_channels() const { return channel_padding < 0 ? traits.defaults.pad_channels : channel_padding != 0; }
  // Training: cbr/cbar keep a 1-bit ReLU mask for their backward instead of re-reading y (the
  // pack_relu_mask pass): -1 automatic (the backend's default: on for cuda, where the batchnorm
  // backward is bandwidth-bound), 0 off, 1 on.
  int relu_bit_mask = -1;
  bool packs_relu_mask() const { return relu_bit_mask < 0 ? traits.defaults.pack_relu_mask : relu_bit_mask != 0; }
  // Training: a cbr whose output only the next convolution reads hands that convolution its
  // batchnorm affine instead, and the output is never stored; a projection shortcut's
  // batchnorm is applied by its block end (the defer_bn_apply pass): -1 automatic (the
  // backend's default: on for cuda, the prologue only in the dtypes its convolutions fuse it
  // in), 0 off, 1 on wherever the backend has its kernels.
  int bn_apply_prologue = -1;
  // Training: a max pooling keeps a one-byte window index for its backward, which then reads
  // it instead of the pooling's input (the save_maxpool_index pass): -1 automatic (the
  // backend's default: on for cuda, where it frees the input at once), 0 off, 1 on wherever
  // the backend has its kernels.
  int maxpool_window_index = -1;
  // Both modes: batchnorm → relu pairs the conv fusions leave (pre-activation blocks) become
  // bn_relu (the fuse_bn_relu pass): -1 automatic (on for every backend), 0 off (each pair is
  // recorded as refused with that reason), 1 on.
  int bn_relu_fusion = -1;
  bool fuses_bn_relu() const { return bn_relu_fusion != 0; }
  // Training: the batchnorm backward and the weight gradient of a layer whose input takes no
  // gradient (the first layer) become one cbr_weight_backward, one pass on the GPU (the
  // fuse_cbr_weight_backward pass): -1 automatic (the backend's default: on for cuda), 0 off,
  // 1 on wherever the backend has its kernels.
  int cbr_weight_backward = -1;
  bool fuses_cbr_weight_backward() const {
    return cbr_weight_backward < 0 ? traits.defaults.fuse_cbr_weight_backward : cbr_weight_backward != 0;
  }
  bool saves_maxpool_index() const {
    return maxpool_window_index < 0 ? traits.defaults.save_maxpool_index : maxpool_window_index != 0;
  }
  bool defers_bn_apply() const {
    return bn_apply_prologue < 0 ? traits.defaults.defer_bn_apply : bn_apply_prologue != 0;
  }
  bool uses_loss_scaling() const { return loss_scaling < 0 ? precision == DType::f16 : loss_scaling != 0; }
};

// One applied fusion: the pattern, the nodes it replaced and the node that replaced them.
struct FusionRecord {
  std::string pass, pattern, fused_node;
  std::vector<std::string> nodes;
};
// One candidate a fusion pass looked at and refused, with the reason in words.
struct Rejection {
  std::string pass, pattern, node, reason;
};

// What passes learn and leave for later stages (and for `trident explain`).
struct PassContext {
  explicit PassContext(const CompileOptions& o) : options(o) {}
  const CompileOptions& options;
  int loss = -1;                            // training: the scalar loss value
  int logits = -1;                          // the model's output
  std::vector<std::pair<int, int>> param_grads;  // (parameter, its gradient value)
  int loss_scale = -1, good_steps = -1;     // dynamic loss scaling state (autodiff makes them)
  std::vector<std::string> applied;         // names of passes that ran
  std::vector<FusionRecord> fusions;
  std::vector<Rejection> rejections;
};

struct Pass {
  std::string name;
  std::function<void(ir::Graph&, PassContext&)> run;
  bool required = false;  // correctness depends on it: cannot be disabled
  bool fusion = false;    // a fusion pass: `explain` compares against the graph without these
};

class PassManager {
 public:
  void add(Pass p) { passes_.push_back(std::move(p)); }
  // Runs every pass in order; throws an Error naming a pass that breaks the graph.
  void run(ir::Graph& g, PassContext& ctx) const;
  const std::vector<Pass>& passes() const { return passes_; }

 private:
  std::vector<Pass> passes_;
};

// The standard pipeline for a mode (see docs/ARCHITECTURE.md).
PassManager standard_pipeline(Mode mode, const CompileOptions& opt);

// Individual passes, each in its own file.
void set_batchnorm_mode(ir::Graph& g, PassContext& ctx);  // inference: BN uses running stats
void fuse_conv_bn_relu(ir::Graph& g, PassContext& ctx);   // training: CBR and CBAR
void fuse_bn_relu(ir::Graph& g, PassContext& ctx);        // both: BN → ReLU (pre-activation)
void fuse_silu(ir::Graph& g, PassContext& ctx);           // both: x·sigmoid(x) → silu
void cancel_conv_bias(ir::Graph& g, PassContext& ctx);    // training: conv bias into the running mean
void fold_bn(ir::Graph& g, PassContext& ctx);             // inference: BN into conv weights
void fuse_conv_epilogue(ir::Graph& g, PassContext& ctx);  // inference: conv + bias/add/relu
void fuse_elementwise(ir::Graph& g, PassContext& ctx);    // both: vertical/horizontal chains
void reuse_residual_buffer(ir::Graph& g, PassContext& ctx);  // inference: epilogue in place
void reuse_gradient_buffer(ir::Graph& g, PassContext& ctx);  // training: batchnorm backward over dy
void attach_loss(ir::Graph& g, PassContext& ctx);         // labels input + cross-entropy
void autodiff(ir::Graph& g, PassContext& ctx);            // generated backward graph
void fold_gradient_sum(ir::Graph& g, PassContext& ctx);   // training: dy + dy' into the BN backward
void join_channel_gradients(ir::Graph& g, PassContext& ctx);  // training: placed slice gradients' sum as a concat
void pack_relu_mask(ir::Graph& g, PassContext& ctx);      // training: cbr/cbar keep a 1-bit mask
void defer_bn_apply(ir::Graph& g, PassContext& ctx);      // training: BN apply into the next conv
void save_maxpool_index(ir::Graph& g, PassContext& ctx);  // training: max pooling keeps a window index
void fold_maxpool_gradient(ir::Graph& g, PassContext& ctx);  // training: the BN backward routes a pooled gradient
void fuse_cbr_weight_backward(ir::Graph& g, PassContext& ctx);  // training: first layer's BN backward + wgrad
void group_weight_casts(ir::Graph& g, PassContext& ctx);  // mixed precision: one cast of all weights
void append_optimizer(ir::Graph& g, PassContext& ctx);    // the optimizer step node
void fold_gradient_cast(ir::Graph& g, PassContext& ctx);  // mixed precision: the optimizer reads f16 gradients
void allreduce_gradients(ir::Graph& g, PassContext& ctx); // data parallel: gradients averaged over ranks
void dead_code_elimination(ir::Graph& g, PassContext& ctx);
void assign_precision(ir::Graph& g, PassContext& ctx);    // mixed precision: f16/bf16 activations
void pad_channels(ir::Graph& g, PassContext& ctx);        // GPU: conv input channels to 16 bytes
void seed_dropout(ir::Graph& g, PassContext& ctx);        // training: dropout as a seeded mask and a mul
void remove_dropout(ir::Graph& g, PassContext& ctx);      // inference: dropout is the identity
void quantize_int8(ir::Graph& g, PassContext& ctx);       // inference: convolutions in int8
void quantize_int8_from_pairs(ir::Graph& g, PassContext& ctx);  // ...with an imported QDQ model's scales

}  // namespace trident::passes
