// Crafted ONNX models whose shapes are chosen to overflow element counts: each import is one
// Error naming the node, never a wrapped count that would size a buffer too small.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "support/onnx_bytes.h"
#include "support/special_files.h"

namespace trident {
namespace {

using test_support::conv_model_bytes;

// Imports, or returns the Error's message ("" when the import succeeded).
std::string import_error(const std::string& bytes, int64_t batch) {
  try {
    frontend::import_onnx_from_memory(bytes.data(), bytes.size(), {batch}, "crafted.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CraftedOnnx, TheSameModelWithSmallShapesImports) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  EXPECT_EQ(import_error(conv_model_bytes(2, 3, 1, 1), 0), "");
}

// N = 2^22, a 2x2 kernel padded by 2^20 on a 1x1 image: [2^22, 2^21, 2^21, 1] has exactly 2^64
// elements, which an unchecked product wraps to 0.
TEST(CraftedOnnx, AConvOutputOfTwoToTheSixtyFourElementsIsRefused) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const std::string msg = import_error(conv_model_bytes(int64_t{1} << 22, 1, 2, int64_t{1} << 20), 0);
  ASSERT_NE(msg, "") << "imported a tensor of 2^64 elements";
  EXPECT_NE(msg.find("crafted.onnx"), std::string::npos) << msg;
  EXPECT_NE(msg.find("conv"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2^40 elements"), std::string::npos) << msg;
}

// A symbolic batch overridden by --batch 65536: the output [2^16, 2^21, 2^21, 64] has 2^64
// elements.
TEST(CraftedOnnx, ABatchOverrideThatOverflowsTheOutputIsRefused) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const std::string model = conv_model_bytes(0, 64, 2, int64_t{1} << 20);
  const std::string msg = import_error(model, 65536);
  ASSERT_NE(msg, "") << "imported a tensor of 2^64 elements";
  EXPECT_NE(msg.find("2^40 elements"), std::string::npos) << msg;
}

// A FIFO given as a model used to block for ever; a directory named x.onnx was "larger than 2 GiB".
TEST(CraftedOnnx, AFifoOrADirectoryIsRefusedForWhatItIs) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const test_support::SpecialFiles f("onnx", "pipe.onnx", "x.onnx");
  test_support::expect_special_files_refused([](const std::string& p) { frontend::import_onnx(p); }, f);
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// Node and op names are echoed in the importer's sentences; a crafted one carried terminal
// escape sequences and forged extra lines through.
TEST(CraftedOnnx, NamesFromTheFileAreEscapedInMessages) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  const std::string msg =
      import_error(conv_model_bytes(2, 3, 1, 1, "conv\x1b[2J\ntrident: ok\xff", "Frob\x07nicate"), 0);
  ASSERT_NE(msg, "");
  EXPECT_EQ(msg.find_first_of("\x1b\n\x07"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 'conv\\x1b[2J\\ntrident: ok\\xff' (Frob\\x07nicate, opset 13)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// A BatchNormalization with a negative or non-finite running variance made every output NaN
// and `trident infer` exit 0; the import now refuses it naming the node and the initializer.
TEST(CraftedOnnx, ANegativeOrNonFiniteRunningVarianceIsRefused) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  EXPECT_EQ(import_error(test_support::conv_bn_model_bytes(1.0f), 0), "");
  EXPECT_EQ(import_error(test_support::conv_bn_model_bytes(0.0f), 0), "");
  for (float bad : {-1.0f, std::nanf(""), INFINITY}) {
    const std::string msg = import_error(test_support::conv_bn_model_bytes(bad), 0);
    EXPECT_NE(msg.find("crafted.onnx: node 'bn' (BatchNormalization"), std::string::npos) << msg;
    EXPECT_NE(msg.find("input_var 'var' holds"), std::string::npos) << msg;
    EXPECT_NE(msg.find("must be finite and not negative"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// A Flatten or Reshape reading the graph input itself: the importer held a reference to the
// input's shape while adding the output value, which moved every value (heap-use-after-free
// under ASan, found by fuzz_onnx). Both must import as a plain [1, 3] flatten.
TEST(CraftedOnnx, AFlattenOrReshapeOfTheGraphInputImports) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
  for (bool reshape : {false, true}) {
    SCOPED_TRACE(reshape ? "Reshape" : "Flatten");
    const std::string bytes = test_support::flatten_input_model_bytes(reshape);
    const frontend::OnnxImport m = frontend::import_onnx_from_memory(bytes.data(), bytes.size(), {0}, "crafted.onnx");
    ASSERT_EQ(m.graph.outputs().size(), 1u);
    EXPECT_EQ(m.graph.value(m.graph.outputs()[0]).shape, (Shape{1, 3}));
  }
}

}  // namespace
}  // namespace trident
