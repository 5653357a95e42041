// Reading the file a user passes as --weights or to Network::load_weights: a trident checkpoint
// or a PyTorch state dict in safetensors, told apart by what the file holds
// (frontend/torch_layout.h), not by its name, and returned in trident's layouts for the
// model about to use them; and loading it into an executable, where fine-tuning skips what does
// not fit a new head.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/torch_layout.h"
#include "ir/graph.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/executable.h"
#include "runtime/weights.h"

namespace trident::runtime {

// True when `weights` (read with `metadata`) are in PyTorch's layouts: metadata format "pt"
// (what safetensors.torch writes), a batch counter, or a converted tensor whose shape fits
// only PyTorch's layout; false for trident's checkpoints and shapes that fit only trident's.
// Files where every shape fits both come from outside trident and are taken as PyTorch's.
bool is_torch_state_dict(const frontend::TorchLayout& layout, const ir::Graph& model, const WeightMap& weights,
                         const Metadata& metadata);

struct WeightFile {
  WeightMap weights;    // in trident's layouts
  std::string layout;   // "trident" or "PyTorch state dict", for messages
  int64_t steps = 0;    // a checkpoint's optimizer steps (what PyTorch's num_batches_tracked counts); else 0
  // With skip_unfit: the state dict's tensors that fit no layout of the model, "name dtype[shape]".
  std::vector<std::string> unfit;
};

// Reads `path` for `model` (the model graph as built or imported). Errors name the file; with
// `skip_unfit`, a state dict's tensor whose shape fits neither layout is listed instead.
WeightFile read_weight_file(const std::string& path, const ir::Graph& model, bool skip_unfit = false);

struct WeightLoad {
  std::string model;             // the model's name, for messages
  bool skip_mismatched = false;  // skip (and list) tensors of another shape or that the model lacks
  bool require_all = false;      // every model tensor must be in the file (save → load), unless skipped
  bool refuse_non_finite = false;  // training: NaN or infinite weights are an Error, and nothing is loaded
};

struct LoadedWeights {
  size_t loaded = 0;
  std::string layout;                // as WeightFile's
  int64_t steps = 0;
  std::vector<std::string> skipped;  // "name f32[1000,512] (the model's f32[3,512])" or "name (not in the model)"
  std::string non_finite;            // the first loaded tensor holding a NaN or an infinity, or ""
};

// Reads `path` for `model` and loads it into `exe` by name. Optimizer state the executable has
// no place for (another optimizer's) is left out. Tensors the file lacks keep their values unless
// `require_all`; a tensor of another shape than the model's, or one the model lacks, is an Error
// naming it (and saying how to fine-tune) or, with skip_mismatched, left out and listed.
LoadedWeights load_weight_file(const std::string& path, const ir::Graph& model, Executable& exe, const WeightLoad& how);

// Training state a network may have no place for (an inference network, another optimizer, no
// dropout): optimizer state, the loss scale, dropout's random state.
bool is_training_state(const std::string& name);

// The first tensor of `weights` holding a NaN or an infinity ("" when none does): a training run
// refuses such weights, inference says so.
std::string non_finite_tensor(const WeightMap& weights);

// "skipped 2 tensors of 'w.safetensors' that do not fit the model, which keep their initial
// values: fc.weight f32[1000,512] (the model's f32[3,512]), fc.bias ...", for a notice.
std::string skipped_sentence(const std::string& path, const std::vector<std::string>& skipped);

}  // namespace trident::runtime
