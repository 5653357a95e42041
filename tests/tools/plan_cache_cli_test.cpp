// The plan cache through the real binary: a CPU inference compile that timed its convolutions
// leaves their choices in --plan-cache DIR, and the next compile of the same model takes every
// one of them from there untimed (its kernels say "from the plan cache"); --plan-cache off
// leaves no file; a cache file whose machine line names another machine or library is named
// in one sentence, not used, and rewritten.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_binary.h"

namespace {

using trident::test_support::run_trident;

std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("trident_plan_cache_cli_" + name);
  std::filesystem::remove_all(d);
  return d;
}

// (kernels whose choice was timed now, kernels whose choice came from the cache)
std::pair<int, int> choices(const std::string& explain_json) {
  const nlohmann::json j = nlohmann::json::parse(explain_json);
  int timed = 0, cached = 0;
  for (const auto& k : j["kernels"]) {
    const std::string how = k["implementation"];
    if (how.find("from the plan cache") != std::string::npos) ++cached;
    else if (how.find(", timed ") != std::string::npos) ++timed;
  }
  return {timed, cached};
}

// The one plan cache file in `dir` (cpu-<machine>.plans), or an empty path.
std::filesystem::path plans_in(const std::filesystem::path& dir) {
  std::filesystem::path found;
  if (!std::filesystem::is_directory(dir)) return found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".plans") found = e.path();
  return found;
}

std::string explain(const std::filesystem::path& cache) {
  return "explain --model resnet_cifar --mode infer --batch 2 --json --plan-cache " + cache.string();
}

TEST(PlanCacheCli, ASecondCompileTakesEveryTimedChoiceFromTheCache) {
  const auto dir = fresh_dir("second");
  const auto first = run_trident(explain(dir), false);
  ASSERT_EQ(first.code, 0) << first.output;
  const auto [timed, none] = choices(first.output);
  EXPECT_EQ(none, 0);
  if (timed == 0) GTEST_SKIP() << "oneDNN offers one implementation per convolution here: nothing is timed";
  const auto plans = plans_in(dir);
  ASSERT_TRUE(std::filesystem::is_regular_file(plans)) << dir;
  EXPECT_EQ(plans.filename().string().rfind("cpu-", 0), 0u) << plans;
  std::ifstream in(plans);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "trident cpu plans 1");

  const auto second = run_trident(explain(dir), false);
  ASSERT_EQ(second.code, 0) << second.output;
  const auto [timed_again, cached] = choices(second.output);
  EXPECT_EQ(timed_again, 0) << second.output;
  EXPECT_EQ(cached, timed) << second.output;
}

TEST(PlanCacheCli, TheDefaultFolderIsTridentPlanCacheAndOffWritesNothing) {
  const auto dir = fresh_dir("default");
  ASSERT_EQ(::setenv("TRIDENT_PLAN_CACHE", dir.c_str(), 1), 0);
  const std::string args = "explain --model resnet_cifar --mode infer --batch 2 --json";
  const auto off = run_trident(args + " --plan-cache off", false);
  ASSERT_EQ(off.code, 0) << off.output;
  EXPECT_EQ(choices(off.output).second, 0);
  EXPECT_FALSE(std::filesystem::exists(dir));
  const auto on = run_trident(args, false);
  ::unsetenv("TRIDENT_PLAN_CACHE");
  ASSERT_EQ(on.code, 0) << on.output;
  EXPECT_EQ(plans_in(dir).empty(), choices(on.output).first == 0) << on.output;
}

TEST(PlanCacheCli, AForeignCacheIsNamedNotUsedAndRewritten) {
  const auto dir = fresh_dir("foreign");
  ASSERT_EQ(run_trident(explain(dir), false).code, 0);
  const auto plans = plans_in(dir);
  if (plans.empty()) GTEST_SKIP() << "nothing was timed, so no cache was written";
  {
    std::ofstream out(plans, std::ios::trunc);
    out << "trident cpu plans 1\nmachine: onednn 0.0.0; isa 0; cpu elsewhere\nsome key\t0\tdirect (x), timed 1 ms\n";
  }
  const auto r = run_trident(explain(dir), true);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("trident: the plan cache '" + plans.string() +
                          "' is not used: it was timed on another machine or library"),
            std::string::npos)
      << r.output;
  std::ifstream in(plans);
  std::string header, machine;
  std::getline(in, header);
  std::getline(in, machine);
  EXPECT_EQ(header, "trident cpu plans 1");
  EXPECT_EQ(machine.find("cpu elsewhere"), std::string::npos) << machine;  // rewritten for this machine
  const auto third = run_trident(explain(dir), false);
  EXPECT_GT(choices(third.output).second, 0) << third.output;
}

}  // namespace
