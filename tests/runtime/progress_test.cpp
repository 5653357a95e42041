// Tests for ProgressBar: the rendered line, duration formatting, the short non-interactive log
// (at most one line per tenth plus the final one) and the '\r' redraws of interactive mode.
// Output goes to a std::ostringstream; the interactive flag is injected.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/progress.h"

using trident::ProgressBar;
using trident::format_duration;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(12.4), "0:12");
  EXPECT_EQ(format_duration(75), "1:15");
  EXPECT_EQ(format_duration(3599.4), "59:59");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?:??");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "?:??");
}

TEST(Progress, RenderLine) {
  std::ostringstream os;
  ProgressBar bar("epoch 1/3", 468, os, false);
  const ProgressBar::Metrics m = {{"", "1234 img/s"}, {"loss", "0.4213"}, {"acc", "85.1%"}};
  // 312 * 20 / 468 = 13 hashes; ETA = 10 s * 156 / 312 = 5 s.
  EXPECT_EQ(bar.render(312, 10.0, m),
            "epoch 1/3 [#############.......] 312/468  1234 img/s  loss 0.4213  acc 85.1%  ETA 0:05");
  EXPECT_EQ(bar.render(0, 0.0, {}), "epoch 1/3 [....................] 0/468");
  EXPECT_EQ(bar.render(468, 95.0, {{"loss", "0.3"}}, true),
            "epoch 1/3 [####################] 468/468  loss 0.3  time 1:35");
  EXPECT_EQ(os.str(), "");  // render does not print

  ProgressBar unknown("eval", 0, os, false);
  EXPECT_EQ(unknown.render(5, 1.0, {{"acc", "90%"}}), "eval 5  acc 90%");
}

TEST(Progress, NonInteractiveIsShort) {
  std::ostringstream os;
  {
    ProgressBar bar("epoch 2/3", 1000, os, false);
    for (int i = 1; i <= 1000; ++i) bar.update(i, {{"loss", std::to_string(1.0 / i)}});
    EXPECT_LE(lines_of(os.str()).size(), 9u);
    bar.finish({{"loss", "0.0010"}, {"acc", "91.0%"}});
    bar.finish({{"loss", "ignored"}});  // a second finish prints nothing
  }
  const std::string text = os.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const auto lines = lines_of(text);
  EXPECT_EQ(lines.size(), 10u);  // 10%, 20%, ..., 90% and the final line
  EXPECT_NE(lines.front().find("100/1000"), std::string::npos) << lines.front();
  EXPECT_NE(lines.front().find("ETA"), std::string::npos) << lines.front();
  const std::string& last = lines.back();
  EXPECT_EQ(last.rfind("epoch 2/3 [####################] 1000/1000  loss 0.0010  acc 91.0%  time ", 0), 0u)
      << last;
  EXPECT_EQ(last.find("ETA"), std::string::npos);
}

TEST(Progress, NonInteractiveJumpsPrintOnce) {
  std::ostringstream os;
  ProgressBar bar("epoch 1/1", 10, os, false);
  bar.update(0);
  EXPECT_EQ(os.str(), "");
  bar.update(7);  // crosses several tenths at once: one line
  EXPECT_EQ(lines_of(os.str()).size(), 1u);
  bar.update(7);
  bar.update(10);  // 100% is left to finish
  EXPECT_EQ(lines_of(os.str()).size(), 1u);
  bar.finish();
  EXPECT_EQ(lines_of(os.str()).size(), 2u);
}

TEST(Progress, InteractiveRedrawsOneLine) {
  std::ostringstream os;
  ProgressBar bar("epoch 1/3", 4, os, true);
  bar.update(1, {{"loss", "1.234567"}});
  ASSERT_FALSE(os.str().empty());
  EXPECT_EQ(os.str().front(), '\r');
  EXPECT_EQ(os.str().find('\n'), std::string::npos);
  bar.update(4, {{"loss", "0.5"}});  // the last step is always drawn; shorter, so blanks follow
  const std::string after = os.str();
  const auto second = after.rfind('\r');
  ASSERT_NE(second, 0u);
  EXPECT_EQ(after.find('\n'), std::string::npos);
  EXPECT_EQ(after.size() - second, second);  // the redraw covers the whole previous line
  bar.finish({{"loss", "0.5"}});
  const std::string text = os.str();
  EXPECT_EQ(text.back(), '\n');
  const std::string final_line = text.substr(text.rfind('\r') + 1);
  EXPECT_EQ(final_line.rfind("epoch 1/3 [####################] 4/4  loss 0.5  time ", 0), 0u)
      << final_line;
}

TEST(Progress, InteractiveUnfinishedBarEndsItsLine) {
  std::ostringstream os;
  {
    ProgressBar bar("eval", 10, os, true);
    bar.update(3);
  }
  EXPECT_EQ(os.str().back(), '\n');
}

TEST(Progress, RejectsNegativeTotal) {
  std::ostringstream os;
  EXPECT_THROW(ProgressBar("x", -1, os, false), trident::Error);
}

// On an 80-column terminal the training line (~86 characters) used to wrap, so each redraw left
// a new line behind. Interactive lines now stay below the width: the bar narrows, then the end
// of the line is cut; a log (not a terminal) keeps the whole line.
TEST(Progress, InteractiveLinesFitTheTerminal) {
  const ProgressBar::Metrics m{{"", "5963 img/s"}, {"loss", "32863830276354822144.0000"}, {"acc", "9.6%"}};
  for (int columns : {40, 60, 80}) {
    std::ostringstream os;
    ProgressBar bar("epoch 2/2", 16, os, true, columns);
    for (int i = 1; i <= 16; ++i) bar.update(i, m);
    bar.finish(m);
    std::string text = os.str();
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i)
      if (i == text.size() || text[i] == '\r' || text[i] == '\n') {
        EXPECT_LT(i - start, static_cast<size_t>(columns)) << columns << " columns: " << text.substr(start, i - start);
        start = i + 1;
      }
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << "one line per bar";
  }
  // The usual line at 80 columns: the bar gives up 7 of its 20 cells and the ETA stays.
  std::ostringstream wide;
  const ProgressBar::Metrics usual{{"", "5963 img/s"}, {"loss", "0.4213"}, {"acc", "85.2%"}};
  ProgressBar narrow("epoch 1/3", 468, wide, true, 80);
  const std::string line = narrow.render(312, 18.0, usual);
  EXPECT_EQ(line, "epoch 1/3 [########.....] 312/468  5963 img/s  loss 0.4213  acc 85.2%  ETA 0:09");
  ProgressBar log("epoch 1/1", 4, wide, false, 40);
  EXPECT_GT(log.render(2, 1.0, m).size(), 40u);
}
