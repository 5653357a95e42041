// Weights loaded into an executable (--weights, --resume, ONNX initializers through the Runner)
// with a negative or non-finite BatchNorm running variance are refused naming the tensor: the
// inference outputs were all NaN and the run exited 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/runner.h"
#include "support/error_of.h"

using namespace trident;
using test_support::error_of;

namespace {

// The first running variance of the weights, set to `v` at channel 1.
runtime::WeightMap with_variance(runtime::WeightMap w, float v, std::string& name) {
  for (auto& [n, t] : w)
    if (n.size() > 11 && n.compare(n.size() - 11, 11, "running_var") == 0) {
      reinterpret_cast<float*>(t.data.data())[1] = v;
      name = n;
      return w;
    }
  ADD_FAILURE() << "no running variance among the weights";
  return w;
}

}  // namespace

TEST(BatchnormStatistics, ANegativeOrNonFiniteRunningVarianceIsRefused) {
  runtime::RunnerOptions o;
  o.compile.backend = "cpu_ref";
  for (const char* model : {"fmnist_cnn", "resnet_cifar"}) {
    runtime::Runner runner(frontend::build_model(model, {2}), o);
    runner.init_random_weights(1);
    const runtime::WeightMap good = runner.executable().export_weights();
    EXPECT_EQ(error_of([&] { runner.load_weights(good, true); }), "");
    for (float bad : {-0.5f, std::nanf(""), -INFINITY}) {
      std::string name;
      const runtime::WeightMap w = with_variance(good, bad, name);
      const std::string msg = error_of([&] { runner.load_weights(w, true); });
      EXPECT_NE(msg.find("weight '" + name + "' is a batch normalisation's running variance but holds"),
                std::string::npos) << model << ": " << msg;
      EXPECT_NE(msg.find("at channel 1"), std::string::npos) << msg;
    }
    // A refused file changed nothing: the executable still holds the good weights.
    EXPECT_EQ(runner.executable().export_weights().begin()->second.data, good.begin()->second.data);
  }
}
