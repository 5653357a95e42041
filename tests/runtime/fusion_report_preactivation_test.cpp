// What `trident explain` says of a pre-activation network: each bn → relu as a fused group
// of fuse_bn_relu, named "bn → relu → conv (pre-activation)" where a convolution reads it and
// "bn → relu" elsewhere, a refused one with its reason, and fewer kernel launches than with
// the fusion passes off; --disable-pass fuse_bn_relu leaves the pair unfused.
#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "runtime/fusion_report.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

using test_support::count_op;

// stem → bn → relu → conv (pre-activation) → bn → relu → pool, and a batchnorm whose output a
// second reader keeps, which must stay unfused.
ir::Graph preact_model() {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {2, 6, 6, 3});
  const int stem = b.cbr(x, 8, 3, 1, 1, "stem");
  const int c = b.conv(b.relu(b.batchnorm(stem, "pre_bn"), "pre_relu"), 8, 3, 1, 1, {}, "conv");
  const int sum = b.add(c, stem, "add");
  const int kept = b.batchnorm(sum, "shared_bn");
  const int out = b.add(b.relu(kept, "shared_relu"), kept, "reuse");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(b.relu(b.batchnorm(out, "tail_bn"), "tail_relu"))), 4, true, "fc"));
  return g;
}

passes::CompileOptions training() {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  return o;
}

TEST(FusionReportPreActivation, NamesBothFormsAndTheRefusal) {
  const runtime::FusionReport r = runtime::explain("preact", preact_model(), training());
  const std::string text = runtime::report_text(r);
  EXPECT_NE(text.find("bn → relu → conv (pre-activation)"), std::string::npos) << text;
  EXPECT_NE(text.find("pre_bn.bn_relu"), std::string::npos) << text;
  EXPECT_NE(text.find("pre_bn + pre_relu"), std::string::npos) << text;
  EXPECT_NE(text.find("tail_bn.bn_relu"), std::string::npos) << text;
  EXPECT_NE(text.find("the batchnorm output 'shared_bn.y' has 2 consumers"), std::string::npos) << text;
  EXPECT_EQ(count_op(r.fused.graph, "bn_relu"), 2);
  EXPECT_LT(r.launches_fused, r.launches_unfused);

  const nlohmann::json j = runtime::report_json(r);
  int preactivation = 0, plain = 0;
  for (const auto& f : j["fusions"]) {
    if (f["pass"] != "fuse_bn_relu") continue;
    preactivation += f["pattern"] == "bn → relu → conv (pre-activation)";
    plain += f["pattern"] == "bn → relu";
  }
  EXPECT_EQ(preactivation, 1);
  EXPECT_EQ(plain, 1);
}

TEST(FusionReportPreActivation, TheOffSwitchLeavesThePairsUnfused) {
  passes::CompileOptions o = training();
  o.disabled_passes = {"fuse_bn_relu"};
  const runtime::FusionReport r = runtime::explain("preact", preact_model(), o);
  EXPECT_EQ(count_op(r.fused.graph, "bn_relu"), 0);
  EXPECT_EQ(runtime::report_text(r).find("pre-activation"), std::string::npos);
  EXPECT_EQ(count_op(r.fused.graph, "cbr"), 1);  // the stem still fuses
}

}  // namespace
}  // namespace trident
