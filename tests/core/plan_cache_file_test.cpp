// The plan cache format (core/plan_cache_file.h) on the fuzz target's seeds (fuzz/corpus/
// plan_cache, read from the source tree): a cache of this machine gives its choices, another
// machine's or one with a bad line gives none and one sentence, an empty one none and no
// problem; what parses, written again, reads back the same; a choice that would break a line
// is left out when written.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/plan_cache_file.h"

namespace trident {
namespace {

const std::string kHeader = "trident cpu plans 1";
const std::string kMachine = "onednn 3.0.0; isa 1; cpu fuzz";

std::string seed(const std::string& name) {
  std::ifstream in("fuzz/corpus/plan_cache/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlanCacheFile, SeedsOfThisMachineAnotherAndABadLine) {
  std::string problem;
  const PlanChoices two = parse_plan_cache(seed("two_choices.plans"), kHeader, kMachine, problem);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two.begin()->second.note.rfind("direct (jit), timed", 0), 0u);

  EXPECT_TRUE(parse_plan_cache(seed("empty.plans"), kHeader, kMachine, problem).empty());
  EXPECT_EQ(problem, "");

  EXPECT_TRUE(parse_plan_cache(seed("foreign.plans"), kHeader, kMachine, problem).empty());
  EXPECT_EQ(problem, "it was timed on another machine or library (machine: onednn 9.9.9; isa 2; cpu other)");

  problem.clear();
  EXPECT_TRUE(parse_plan_cache(seed("bad_line.plans"), kHeader, kMachine, problem).empty());
  EXPECT_EQ(problem, "line 3 is not 'key TAB index TAB note'");

  problem.clear();
  EXPECT_TRUE(parse_plan_cache("", kHeader, kMachine, problem).empty());
  EXPECT_EQ(problem, "it does not start with the line 'trident cpu plans 1'");
}

TEST(PlanCacheFile, WrittenChoicesReadBackAndUnwritableOnesAreLeftOut) {
  PlanChoices choices{{"conv|a", {0, "direct (brg), timed 1 ms"}},
                      {"conv|b", {3, ""}},
                      {"bad\tkey", {0, "n"}},
                      {"conv|c", {1, "two\nlines"}},
                      {"conv|d", {kMaxPlanIndex + 1, "n"}}};
  const std::string text = format_plan_cache(choices, kHeader, kMachine);
  std::string problem;
  const PlanChoices back = parse_plan_cache(text, kHeader, kMachine, problem);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at("conv|a").note, "direct (brg), timed 1 ms");
  EXPECT_EQ(back.at("conv|b").index, 3);
}

}  // namespace
}  // namespace trident
