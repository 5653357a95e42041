// Benchmark (not a test): how many images a second the image-folder pipeline decodes and
// augments (RandomResizedCrop + flip + normalise, or evaluation's resize + centre crop) on N
// worker threads, consumed as whole batches the way the trainer does — or, with --decode gpu, the
// JPEGs decoded and augmented on the GPU through the cuda backend's input lane, the workers
// only reading files and drawing crops. One JSON line per run; bench/data_pipeline.sh sets PIL
// doing the same work beside it.
#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/cuda_context.h"
#include "backends/cuda/cuda_input_lane.h"
#endif
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"

int main(int argc, char** argv) {
  CLI::App app("trident image-folder pipeline throughput");
  std::string dir;
  trident::data::ImageStreamOptions o;
  o.batch = 32;
  int epochs = 2;
  bool eval = false;
  std::string decode = "cpu";
  app.add_option("--data", dir, "Image folder (its train/ split is read)")->required();
  app.add_option("--workers", o.workers, "Decoding threads")->capture_default_str();
  app.add_option("--image-size", o.image_size, "Crop side")->capture_default_str();
  app.add_option("--batch", o.batch, "Batch size")->capture_default_str();
  app.add_option("--epochs", epochs, "Timed passes over the split (after one untimed pass)")->capture_default_str();
  app.add_flag("--eval", eval, "Time the evaluation transform instead of training's");
  app.add_option("--decode", decode, "cpu (the workers make the floats) or gpu (nvJPEG and the resampling on the GPU)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    o.train = !eval;
    trident::data::ImageFolderBatches src(trident::data::scan_image_folder(dir, "train"), o);
    std::vector<float> images(static_cast<size_t>(o.batch * src.sample_size()));
    std::vector<int32_t> labels(static_cast<size_t>(o.batch));
    std::function<bool()> next = [&] { return src.next(images.data(), labels.data()); };
    std::function<void()> finish = [] {};
    std::string decoder = "the CPU workers";
#ifdef TRIDENT_HAVE_CUDA
    std::unique_ptr<trident::cuda::CudaContext> ctx;
    std::unique_ptr<trident::InputLane> lane;
    void* input = nullptr;
    if (decode == "gpu") {
      ctx = std::make_unique<trident::cuda::CudaContext>();
      const size_t bytes = static_cast<size_t>(o.batch * src.sample_size()) * sizeof(float);
      lane = trident::cuda::make_cuda_input_lane(*ctx, bytes);
      if (!lane->decodes_images(&decoder)) throw trident::Error("the GPU cannot decode here: " + decoder);
      input = ctx->allocate(bytes);
      src.hand_out_images(true);
      next = [&] {
        const bool got = src.next_images(
            [&](const trident::ImageBatchRequest& b, const trident::HostRowMaker& m) { lane->send_images(b, m); },
            labels.data());
        if (got) lane->deliver(input);
        return got;
      };
      finish = [&] { ctx->synchronize(); };
    }
#endif
    if (decode == "gpu" && !src.can_hand_out_images()) throw trident::Error("this build has no GPU backend");
    if (decode == "gpu" && decoder == "the CPU workers") throw trident::Error("this build has no GPU backend");
    auto pass = [&](int64_t epoch) {
      int64_t n = 0;
      src.start_epoch(epoch);
      while (next()) n += o.batch;
      finish();
      return n;
    };
    pass(0);  // warms the page cache and the allocator
    const auto start = std::chrono::steady_clock::now();
    int64_t images_done = 0;
    for (int e = 1; e <= epochs; ++e) images_done += pass(e);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = images_done / seconds;
    std::cout << nlohmann::json{{"bench", "data_pipeline"}, {"impl", "trident"},
                                {"transform", eval ? "eval" : "train"}, {"decode", decode},
                                {"decoder", decoder}, {"workers", o.workers},
                                {"image_size", o.image_size}, {"images", images_done}, {"seconds", seconds},
                                {"images_per_second", rate}, {"images_per_second_per_core", rate / o.workers},
                                {"skipped", src.skipped()}}
                     .dump()
              << std::endl;
  } catch (const trident::Error& e) {
    std::cerr << "trident_bench_data: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
