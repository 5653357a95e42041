// `trident export` through the real binary: what it writes (an ONNX file the importer reads
// back, a state dict `infer` reads as PyTorch's), its report on stdout, and one sentence with
// a non-zero exit for every bad request. onnx/check_export.py compares the files' numbers
// with onnxruntime.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/onnx/onnx_import.h"
#include "runtime/checkpoint/safetensors.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using trident::test_support::run_trident;

bool one_error_line(const std::string& out) {
  return out.rfind("trident: error: ", 0) == 0 && out.find('\n') == out.size() - 1;
}

}  // namespace

TEST(ExportCli, WritesOnnxAndAStateDictAndReportsOnStdout) {
  const fs::path dir = trident::test_support::fresh_temp_dir("export_cli");
  const fs::path onnx = dir / "m.onnx", sd = dir / "m.safetensors";
  auto r = run_trident("export --model resnet_cifar --seed 2 --json --output " + onnx.string(), false);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["format"], "onnx");
  EXPECT_GT(j["nodes"].get<int>(), 20);
  if (trident::frontend::onnx_import_available()) {
    const auto imp = trident::frontend::import_onnx(onnx.string(), {2});
    EXPECT_EQ(imp.graph.value(imp.graph.find_value(imp.input_name)).shape, (trident::Shape{2, 32, 32, 3}));
  }
  r = run_trident("export --model resnet_cifar --seed 2 --output " + sd.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("PyTorch state dict"), std::string::npos) << r.output;
  trident::runtime::Metadata md;
  const auto w = trident::runtime::read_safetensors(sd.string(), &md);
  EXPECT_EQ(md["format"], "pt");
  EXPECT_EQ(w.at("conv1.weight").shape, (trident::Shape{16, 3, 3, 3}));  // OIHW
  EXPECT_TRUE(w.count("bn1.num_batches_tracked"));
  fs::remove_all(dir);
}

TEST(ExportCli, BadRequestsAreOneSentence) {
  const fs::path dir = trident::test_support::fresh_temp_dir("export_cli_bad");
  std::ofstream(dir / "junk.safetensors") << "not a safetensors file";
  const std::string out = " --output " + (dir / "m.onnx").string();
  const std::pair<std::string, std::string> cases[] = {
      {"export --model fmnist_cnn --output " + (dir / "m.bin").string(), "neither .onnx nor .safetensors"},
      {"export --model fmnist_cnn --fold-bn --output " + (dir / "m.safetensors").string(), "--fold-bn"},
      {"export a.ckpt --weights b.ckpt" + out, "give the weights once"},
      {"export --model no_such_model" + out, "no_such_model"},
      {"export --weights " + (dir / "junk.safetensors").string() + out, "junk.safetensors"},
      {"export --weights " + (dir / "absent.ckpt").string() + out, "absent.ckpt"},
      {"export --model fmnist_cnn --format pickle" + out, "--format"},
      {"export --model fmnist_cnn", "--output"},
  };
  for (const auto& [args, mention] : cases) {
    const auto r = run_trident(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.output;
    EXPECT_TRUE(one_error_line(r.output)) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(mention), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  fs::remove_all(dir);
}
