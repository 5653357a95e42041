// How a backend builds and runs an executable's kernels: the choices no compiler pass reads.
// Defined once, here, and held by value by whoever makes the choice (the CLI's flags, the
// runner's and the trainer's configurations) and by the backend context that reads it.
#pragma once
#include <memory>
#include <string>

namespace trident {
namespace distributed {
class World;
}

struct BackendOptions {
  // Time the candidate implementations of each kernel once, when it is built, and keep the
  // fastest: cuDNN's plans on the GPU (as cudnn.benchmark), oneDNN's direct and Winograd
  // convolutions for CPU inference. Off: the library's first choice, a faster start.
  bool autotune = true;
  // CPU inference: 3x3 stride-1 convolutions may run as Winograd F(4,3)/F(2,3) transforms
  // (oneDNN; a different rounding than the direct convolution, within the fp32 tolerance):
  // -1 automatic (where timing both once at build says Winograd is faster; with autotune off,
  // never), 0 never, 1 wherever oneDNN implements it.
  int winograd = -1;
  // GPU: record a step's kernels once as a CUDA graph (on the second run, when every lazy
  // allocation has happened) and replay the recording on later runs: one launch per step.
  bool cuda_graph = true;
  // GPU: a convolution of few input channels (a first layer's padded image) may run on
  // trident's own tensor-core kernel with its batch statistics (backends/cuda/device/
  // small_channel_conv.h), timed against cuDNN where candidates are timed; off: cuDNN always.
  bool small_channel_conv = true;
  // GPU: a data-gradient convolution whose weight gradient follows it runs on a second stream
  // beside that weight gradient (both read the same dy). Off by default: with recorded steps it
  // broke f16/bf16 training of ResNet-18 on 32-pixel images (GpuNetwork.RecordedStepsTrain…),
  // a race not yet found; off, the two run one after the other.
  bool side_stream = false;
  // The same bits on every run, and on the CPU backends at every thread count: nothing is
  // chosen by timing (autotune and Winograd's automatic choice are off), cuDNN runs only its
  // deterministic engines (a layer that has none is an error), and the cpu backend computes the
  // reductions oneDNN splits by thread (weight gradients, batchnorm statistics and their
  // backward) with cpu_ref's fixed-order loops (backends/cpu/reference_routing.cpp).
  bool deterministic = false;
  // Where timed choices persist between runs (one file per backend and machine;
  // backends/cpu/plan_cache.h, backends/cuda/plan_cache.h),
  // so the next compile of the same shapes on this machine takes them instead of timing again;
  // empty: nothing persists. The command line passes default_plan_cache_dir() unless told off.
  std::string plan_cache_dir{};
  // Whether candidates are timed when a kernel is built: autotune, unless deterministic.
  bool times_candidates() const { return autotune && !deterministic; }
  // The distributed world the collective kernels (allreduce_mean) run over; null for a
  // single-process run, whose plan has no collectives (runtime/distributed/world.h).
  std::shared_ptr<distributed::World> world = nullptr;
  // Sync-BN (PyTorch's SyncBatchNorm; off by default): every training batchnorm takes its batch
  // statistics, and its backward the per-channel sums that form dx, over the global batch of
  // all the world's ranks (backends/cpu_ref/batchnorm.cpp, where the cpu backend runs those
  // nodes too; on cuda NCCL sums them, backends/cuda/batchnorm_rank_sum.h). With no world it
  // is plain batchnorm; over a world of one rank the sums are the identity.
  bool sync_batchnorm = false;
  // --bn-group K: sync-BN over groups of K consecutive ranks (0: over all of them), as
  // apex's and MLPerf's group BN; `batchnorm_group` is the world of this rank's group, which
  // the trainer makes from `world` (runtime::Trainer).
  int batchnorm_group_size = 0;
  std::shared_ptr<distributed::World> batchnorm_group = nullptr;
  // The world a batchnorm sums its statistics over under sync_batchnorm: this rank's group when
  // it has more than one rank, else `world` (also a world of one rank: a single GPU tests the
  // collective that way); null without sync_batchnorm, a world, or with groups of one rank.
  distributed::World* batchnorm_world() const;
};

// $TRIDENT_PLAN_CACHE, else $XDG_CACHE_HOME/trident, else $HOME/.cache/trident; "" where none is set.
std::string default_plan_cache_dir();

}  // namespace trident
