// Names from files quoted in messages: control bytes, invalid UTF-8, C1 controls and
// bidirectional overrides are escaped, valid text is untouched, and escaping is idempotent.
#include <gtest/gtest.h>

#include "core/printable.h"

using trident::printable;
using trident::quoted_name;

TEST(Printable, EscapesWhatATerminalWouldActOn) {
  EXPECT_EQ(printable("conv1"), "conv1");
  EXPECT_EQ(printable("\x1b[2J\nnode 'x': ok\r\t\x7f"), "\\x1b[2J\\nnode 'x': ok\\r\\t\\x7f");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\xc2\x9b" "31m"), "\\u{009b}31m");   // C1 CSI
  EXPECT_EQ(printable("abc\xe2\x80\xae" "txt"), "abc\\u{202e}txt");  // right-to-left override
}

TEST(Printable, InvalidUtf8ShowsAsBytesAndValidUtf8IsKept) {
  EXPECT_EQ(printable("\xff"), "\\xff");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");          // truncated
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable("ünïcode €, 𝄞"), "ünïcode €, 𝄞");
}

TEST(Printable, IsIdempotentAndQuotes) {
  const std::string nasty = "\x1b]0;title\x07\xff\xc2\x9b\n";
  EXPECT_EQ(printable(printable(nasty)), printable(nasty));
  EXPECT_EQ(quoted_name("a\nb"), "'a\\nb'");
}
