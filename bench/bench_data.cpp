// Benchmark (not a test): how many images a second the image-folder pipeline decodes and
// augments (RandomResizedCrop + flip + normalise, or evaluation's resize + centre crop) on N
// worker threads, consumed as whole batches the way the trainer does. One JSON line per run;
// bench/data_pipeline.sh sets PIL doing the same work beside it.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/image_folder_batches.h"

int main(int argc, char** argv) {
  CLI::App app("trident image-folder pipeline throughput");
  std::string dir;
  trident::data::ImageStreamOptions o;
  o.batch = 32;
  int epochs = 2;
  bool eval = false;
  app.add_option("--data", dir, "Image folder (its train/ split is read)")->required();
  app.add_option("--workers", o.workers, "Decoding threads")->capture_default_str();
  app.add_option("--image-size", o.image_size, "Crop side")->capture_default_str();
  app.add_option("--batch", o.batch, "Batch size")->capture_default_str();
  app.add_option("--epochs", epochs, "Timed passes over the split (after one untimed pass)")->capture_default_str();
  app.add_flag("--eval", eval, "Time the evaluation transform instead of training's");
  CLI11_PARSE(app, argc, argv);
  try {
    o.train = !eval;
    trident::data::ImageFolderBatches src(trident::data::scan_image_folder(dir, "train"), o);
    std::vector<float> images(static_cast<size_t>(o.batch * src.sample_size()));
    std::vector<int32_t> labels(static_cast<size_t>(o.batch));
    auto pass = [&](int64_t epoch) {
      int64_t n = 0;
      src.start_epoch(epoch);
      while (src.next(images.data(), labels.data())) n += o.batch;
      return n;
    };
    pass(0);  // warms the page cache and the allocator
    const auto start = std::chrono::steady_clock::now();
    int64_t images_done = 0;
    for (int e = 1; e <= epochs; ++e) images_done += pass(e);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = images_done / seconds;
    std::cout << nlohmann::json{{"bench", "data_pipeline"}, {"impl", "trident"},
                                {"transform", eval ? "eval" : "train"}, {"workers", o.workers},
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
