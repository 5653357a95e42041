// A Model compiled for one mode, device, precision and batch: the static plan and kernels the
// engine runs with no allocation per step. Inference and training take host buffers of floats;
// a training network also trains for epochs over a dataset folder, as `trident train` does, and
// every network evaluates, loads PyTorch's weights and exports its own as ONNX or a state dict.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trident/export.h"
#include "trident/model.h"

namespace trident {

enum class Mode { inference, training };
// fp16 and bf16 are mixed precision (fp32 master weights and batchnorm statistics), cuda only;
// int8 is CPU inference with convolutions in int8, calibrated on CompileOptions' images.
enum class Precision { fp32, fp16, bf16, int8 };
// How an image batch lies in a host buffer: NCHW, as PyTorch, ONNX and `trident infer --input`
// hold it, or NHWC, trident's own layout (no conversion). Only 4-D tensors differ.
enum class Layout { nchw, nhwc };

// The optimizer a training network steps its parameters with.
enum class Optimizer { sgd, adamw };

struct CompileOptions {
  Mode mode = Mode::inference;
  // cpu (the build's default CPU backend, oneDNN where built), cpu_ref (the reference backend),
  // cuda, or auto (cuda where a GPU is usable, else cpu; notices() says so).
  std::string device = "cpu";
  Precision precision = Precision::fp32;
  int64_t batch = 1;   // for an ONNX model in inference, 0 keeps the file's batch
  uint64_t seed = 1;   // a zoo model's initial weights, and train()'s shuffling
  // Training: the optimizer, SGD with momentum (and Nesterov's, optionally) or AdamW as
  // torch.optim.AdamW (decoupled weight decay; beta1, beta2, eps). learning_rate is what
  // train_step() uses (set_learning_rate() changes it) and train()'s peak; it and weight_decay
  // serve both. The defaults suit SGD; PyTorch's AdamW defaults are learning_rate 1e-3 and
  // weight_decay 0.01.
  Optimizer optimizer = Optimizer::sgd;
  double learning_rate = 0.05;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // Training loss: cross-entropy against (1 − e)·onehot + e/classes, PyTorch's label_smoothing.
  double label_smoothing = 0;
  // The same bits on every run, and on the CPU at every thread count (`trident train
  // --deterministic`): nothing chosen by timing, cuDNN's deterministic engines only (a layer
  // without one is an error), fixed-order sums on the cpu backend (slower).
  bool deterministic = false;
  // CPU inference: the folder where the convolution choices timed at compile time are kept for
  // the next compile on this machine (`trident infer --plan-cache`); empty: timed every time.
  std::string plan_cache_dir{};
  // Precision::int8: images like those the network will see (NCHW floats of the model's input
  // size, any number, a few hundred typical), read while the constructor runs, on which every
  // convolution input's range is measured; and how a range becomes a scale: "entropy" (least
  // information lost), "percentile" (99.99 %) or "max". A QDQ model needs neither: it runs in
  // int8 at Precision::fp32 with its own scales.
  std::span<const float> calibration_images{};
  std::string calibrator = "entropy";
};

// How many CPU threads the CPU backends run on, for the whole process (as OpenMP's pool):
// at most `max_threads` (0: every core the process may run on); `adaptive` runs on the cores
// other processes leave free, re-measured every 0.1 s, as the trident command does by default.
// Until this is called a process runs on OpenMP's thread count, whatever the machine's load.
TRIDENT_API void set_cpu_threads(int max_threads, bool adaptive);

// train(): the run `trident train` makes, over a dataset folder — Fashion-MNIST's IDX files,
// CIFAR-10's binary batches, or an image folder as torchvision's ImageFolder lays it out
// (DIR/train/<class>/*.jpg|png, DIR/val/<class>/...: decoded and augmented on worker threads,
// RandomResizedCrop and flips, val resized and centre-cropped) — evaluating after every epoch.
struct EpochResult {
  int64_t epoch = 0;  // 1-based
  double loss = 0, accuracy = 0, seconds = 0;  // training, over the epoch's batches
  double images_per_second = 0, learning_rate = 0, data_wait_seconds = 0;
  // The evaluation split ("test", or an image folder's "val") after the epoch.
  double eval_loss = 0, eval_accuracy = 0, eval_top5_accuracy = 0;
  int64_t eval_images = 0;
  std::string skipped;  // what the data passed over so far (unreadable images, other files), or ""
  int64_t skipped_images = 0;  // images that could not be read so far (left out of the evaluation)
  std::string decoded_by;  // an image folder's: what decoded its images ("the GPU (nvJPEG …)", "the CPU workers (…)")
};

struct TrainOptions {
  int64_t epochs = 1;
  double warmup_epochs = 0.2;  // linear warm-up from a tenth of the rate, then cosine decay to 0
  // A step schedule instead of the cosine (torch's MultiStepLR): after the warm-up the rate is
  // multiplied by lr_gamma once each of these many epochs is done. Empty: the cosine.
  std::vector<int64_t> lr_steps;
  double lr_gamma = 0.1;
  // Read only this many images of a split (0: all); an image folder's are a sample across its
  // classes drawn from the network's seed.
  int64_t train_limit = 0, test_limit = 0;
  int image_size = 0;  // image folders: the crops' side; 0 (and it must be): the network's input side
  int workers = 0;     // image folders: decoding threads (0: the cores but one); results do not depend on it
  // Image folders on the GPU: "gpu" decodes and augments the training images there (nvJPEG),
  // "cpu" on the workers, "auto" the GPU where it can (`trident train --decode`).
  std::string decode = "auto";
  std::string save_path;  // a checkpoint after every epoch (`trident train --resume` continues it)
  std::string log_path;   // one JSON line of metrics per epoch
  std::function<void(const EpochResult&)> on_epoch;  // called after every epoch's evaluation
};

struct TrainResult {
  std::vector<EpochResult> epochs;
  std::string eval_split;  // "test", or "val" for an image folder
  double test_loss = 0, test_accuracy = 0, test_top5_accuracy = 0;  // of the trained weights on it
  int64_t test_images = 0;
};

struct EvalOptions {
  int64_t limit = 0;   // evaluate only this many images (0: all)
  int image_size = 0;  // image folders: 0, the network's input side
  int workers = 0;
};

struct EvalResult {
  std::string split;  // "test", or "val" for an image folder
  double loss = 0, accuracy = 0, top5_accuracy = 0;
  int64_t images = 0;
  double seconds = 0;
};

// load_weights(): how a file's tensors meet the network's.
struct LoadOptions {
  // Fine-tuning: skip the tensors whose shape differs from the network's, or that it lacks (a
  // torchvision classifier onto a new head); they keep their values, and load_weights lists them.
  bool skip_mismatched = false;
};

// export_onnx(): ONNX opset 17, NCHW input with a symbolic batch, as `trident export` writes it.
struct OnnxExportOptions {
  bool fold_batchnorm = false;  // fold each batch norm into the convolution before it
};

// A Network may be shared between threads: its calls run one at a time, each holding the
// network's lock for as long as it runs (a thread's call waits for another's to end).
class TRIDENT_API Network {
 public:
  // Compiles `model`; an Error names what is wrong (an unknown device, fp16 on a CPU, cuda
  // without a GPU, a model that does not compile). Weights: a zoo model's from `seed`, an
  // ONNX model's from its file.
  Network(const Model& model, const CompileOptions& options);
  Network(Network&&) noexcept;
  Network& operator=(Network&&) noexcept;
  ~Network();

  Mode mode() const;
  const std::string& backend() const;  // the backend that runs: "cpu", "cpu_ref" or "cuda"
  // What a user should know that compiling chose or changed, one sentence each: device auto
  // falling back to the CPU, what an ONNX import changed. Usually empty.
  const std::vector<std::string>& notices() const;
  int64_t batch() const;
  std::vector<int64_t> input_shape(Layout layout = Layout::nchw) const;
  std::vector<int64_t> output_shape() const;  // of the first output: [batch, classes] for classifiers
  size_t input_size() const;                  // floats in one batch of input
  size_t output_size() const;                 // floats in one batch of output

  // Runs the images: `images` holds any number of whole images in `layout` (input_size() floats
  // are one batch; more or fewer run a batch at a time, the last padded); returns the first
  // output of each image (a 4-D output in `layout` too). A training network runs its inference
  // form on its weights.
  std::vector<float> infer(std::span<const float> images, Layout layout = Layout::nchw);
  // The same into `out`, which must hold the output of exactly those images.
  void infer(std::span<const float> images, std::span<float> out, Layout layout = Layout::nchw);
  // infer() with each row of a [images, classes] output turned into probabilities (softmax).
  std::vector<float> probabilities(std::span<const float> images, Layout layout = Layout::nchw);
  // Device memory in and out, on a network compiled for cuda: `images` NHWC, `out` as
  // output_shape(), both f32; returns when `out` is written. Any other backend is an Error.
  void infer_device(const float* images, float* out);

  // One SGD step of a training network on one batch (`labels`: batch() class indices);
  // returns the batch's loss before the update.
  float train_step(std::span<const float> images, std::span<const int32_t> labels,
                   Layout layout = Layout::nchw);
  void set_learning_rate(double lr);
  // Trains for options.epochs over the dataset in `data_dir` (what `trident train --data` reads:
  // Fashion-MNIST, CIFAR-10 or an image folder, whose classes must be the network's and whose
  // crops its input), evaluating on the test (val) split after every epoch, through the loop
  // `trident train` runs. Each call continues the learning-rate schedule from step 0 of its own.
  TrainResult train(const std::string& data_dir, const TrainOptions& options = {});
  // Scores the weights on the dataset's test split (an image folder's val), as train() does
  // after each epoch.
  EvalResult evaluate(const std::string& data_dir, const EvalOptions& options = {});

  // Writes every parameter and running statistic (and a training network's optimizer state) to a
  // safetensors file, atomically; `trident infer --weights` reads it.
  void save_weights(const std::string& path) const;
  // Reads a safetensors file: trident's layouts (save_weights', or a `trident train --save`
  // checkpoint) or a PyTorch state dict (`safetensors.torch.save_file(model.state_dict(), f)`, or
  // `trident export --format torch`), told apart by content. Every parameter and running
  // statistic must be in it with its shape, unless options.skip_mismatched; returns the names of
  // the tensors it skipped, each with its shape and the network's.
  std::vector<std::string> load_weights(const std::string& path, const LoadOptions& options = {});
  // The model and its weights out of trident: an ONNX file (opset 17, NCHW, as PyTorch exports)
  // or a PyTorch state dict in safetensors that `model.load_state_dict` accepts.
  void export_onnx(const std::string& path, const OnnxExportOptions& options = {}) const;
  void export_state_dict(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trident
