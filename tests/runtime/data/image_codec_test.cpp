// Decoding through libpng and libjpeg-turbo: PNGs of every colour type give their exact pixels
// as RGB (PNG is lossless), JPEGs give theirs within compression error, and anything else is
// one sentence naming the file, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <vector>

#include "runtime/data/image_codec.h"
#include "support/error_of.h"

using namespace trident::data;
using trident::test_support::error_of;

namespace {

RgbImage decode(const std::vector<uint8_t>& bytes) { return decode_image(bytes.data(), bytes.size(), "'x.img'"); }

std::vector<uint8_t> rgb_of(const std::vector<uint8_t>& grey) {
  std::vector<uint8_t> out;
  for (uint8_t g : grey) out.insert(out.end(), {g, g, g});
  return out;
}

}  // namespace

TEST(ImageCodec, RgbPngIsExact) {
  const std::vector<uint8_t> px = {0, 1, 2, 250, 251, 252, 10, 20, 30, 40, 50, 60, 70, 80, 90, 255, 128, 0};
  const RgbImage img = decode(encode_png(px.data(), 3, 2, 3));
  EXPECT_EQ(img.width, 3);
  EXPECT_EQ(img.height, 2);
  EXPECT_EQ(img.pixels, px);
}

TEST(ImageCodec, GreyAlphaAndPalettePngsBecomeRgb) {
  const std::vector<uint8_t> grey = {0, 77, 200, 255};
  EXPECT_EQ(decode(encode_png(grey.data(), 2, 2, 1)).pixels, rgb_of(grey));
  // Alpha is dropped, not blended, as PIL's convert("RGB") does.
  const std::vector<uint8_t> grey_alpha = {0, 255, 77, 0, 200, 10, 255, 128};
  EXPECT_EQ(decode(encode_png(grey_alpha.data(), 2, 2, 2)).pixels, rgb_of(grey));
  const std::vector<uint8_t> rgba = {1, 2, 3, 0, 4, 5, 6, 99};
  EXPECT_EQ(decode(encode_png(rgba.data(), 2, 1, 4)).pixels, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  const std::vector<uint8_t> palette = {10, 20, 30, 200, 100, 0, 7, 8, 9};
  const std::vector<uint8_t> indices = {2, 0, 1, 1};
  EXPECT_EQ(decode(encode_png(indices.data(), 2, 2, 1, palette)).pixels,
            (std::vector<uint8_t>{7, 8, 9, 10, 20, 30, 200, 100, 0, 200, 100, 0}));
}

TEST(ImageCodec, JpegsDecodeWithinCompressionError) {
  std::vector<uint8_t> px(16 * 8 * 3);
  for (size_t i = 0; i < px.size(); i += 3) px[i] = 180, px[i + 1] = 90, px[i + 2] = 30;
  const RgbImage img = decode(encode_jpeg(px.data(), 16, 8, 3, 95));
  ASSERT_EQ(img.width, 16);
  ASSERT_EQ(img.height, 8);
  for (size_t i = 0; i < px.size(); ++i) EXPECT_NEAR(img.pixels[i], px[i], 4) << i;

  const std::vector<uint8_t> grey(8 * 8, 120);
  const RgbImage g = decode(encode_jpeg(grey.data(), 8, 8, 1, 95));
  ASSERT_EQ(g.pixels.size(), 8u * 8 * 3);
  for (size_t i = 0; i < g.pixels.size(); i += 3) {
    EXPECT_NEAR(g.pixels[i], 120, 2);
    EXPECT_EQ(g.pixels[i], g.pixels[i + 1]);
    EXPECT_EQ(g.pixels[i], g.pixels[i + 2]);
  }
}

TEST(ImageCodec, RefusalsAreOneSentenceNamingTheFile) {
  const std::vector<uint8_t> cmyk(8 * 8 * 4, 100);
  EXPECT_EQ(error_of([&] { decode(encode_jpeg(cmyk.data(), 8, 8, 4, 90)); }),
            "'x.img' is a CMYK JPEG, which trident does not convert; save it as RGB");
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_EQ(error_of([&] { decode(text); }),
            "'x.img' is neither a JPEG nor a PNG (its first bytes are no signature of either)");

  std::vector<uint8_t> png = encode_png(text.data(), 1, 1, 3);
  png.resize(png.size() / 2);
  EXPECT_EQ(error_of([&] { decode(png); }).rfind("'x.img' is not a readable PNG: ", 0), 0u) << error_of([&] { decode(png); });
  std::vector<uint8_t> jpeg = {0xFF, 0xD8, 0xFF, 0x00, 0x13, 0x37, 0x00, 0x00};
  EXPECT_EQ(error_of([&] { decode(jpeg); }).rfind("'x.img' is not a readable JPEG: ", 0), 0u) << error_of([&] { decode(jpeg); });
}

TEST(ImageCodec, ImageExtensions) {
  EXPECT_TRUE(has_image_extension("a.jpg"));
  EXPECT_TRUE(has_image_extension("a.JPEG"));
  EXPECT_TRUE(has_image_extension("b.Png"));
  EXPECT_FALSE(has_image_extension("notes.txt"));
  EXPECT_FALSE(has_image_extension("jpg"));
}

// A training crop's region: the pixels inside the wanted box are those of the whole decode, bit
// for bit, for colour (4:2:0 chroma, the encoder's default) and grey JPEGs of sizes that are no
// multiple of an MCU, boxes anywhere (edges and corners included); the decode covers the box and
// is smaller than the image when the box is; a box outside the image decodes it whole; a PNG
// decodes whole and still has `want` asked.
TEST(ImageCodec, AJpegRegionHoldsTheWholeDecodesPixels) {
  std::mt19937 rng(4);
  for (const int channels : {3, 1}) {
    SCOPED_TRACE(channels);
    const int W = 203, H = 157;
    std::vector<uint8_t> px(static_cast<size_t>(W) * H * channels);
    for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 7 + (i / 97) * 13) % 251);
    const std::vector<uint8_t> jpeg = encode_jpeg(px.data(), W, H, channels, 90);
    const RgbImage whole = decode_image(jpeg.data(), jpeg.size(), "whole");
    for (int t = 0; t < 300; ++t) {
      CropBox box;
      box.top = static_cast<int>(rng() % H);
      box.left = static_cast<int>(rng() % W);
      box.height = 1 + static_cast<int>(rng() % (H - box.top));
      box.width = 1 + static_cast<int>(rng() % (W - box.left));
      int asked = 0;
      const RgbRegion r = decode_image_region(jpeg.data(), jpeg.size(), "region", [&](int h, int w) {
        ++asked;
        EXPECT_EQ(h, H);
        EXPECT_EQ(w, W);
        return box;
      });
      ASSERT_EQ(asked, 1);
      EXPECT_EQ(r.full_height, H);
      EXPECT_EQ(r.full_width, W);
      ASSERT_LE(r.top, box.top);
      ASSERT_LE(r.left, box.left);
      ASSERT_GE(r.top + r.image.height, box.top + box.height);
      ASSERT_GE(r.left + r.image.width, box.left + box.width);
      if (box.height < H / 2) {
        EXPECT_LT(r.image.height, H);
      }
      int differing = 0;
      for (int y = box.top; y < box.top + box.height; ++y)
        for (int x = box.left; x < box.left + box.width; ++x)
          for (int c = 0; c < 3; ++c)
            differing += r.image.pixels[(static_cast<size_t>(y - r.top) * r.image.width + (x - r.left)) * 3 + c] !=
                         whole.pixels[(static_cast<size_t>(y) * W + x) * 3 + c];
      ASSERT_EQ(differing, 0) << "box " << box.height << "x" << box.width << " at (" << box.top << ", " << box.left << ")";
    }
    const RgbRegion outside = decode_image_region(jpeg.data(), jpeg.size(), "outside", [](int, int) {
      return CropBox{-1, 0, 5, 5};
    });
    EXPECT_EQ(outside.image.pixels, whole.pixels);
  }
  std::vector<uint8_t> rgb(12 * 9 * 3, 77);
  const std::vector<uint8_t> png = encode_png(rgb.data(), 12, 9, 3);
  int asked = 0;
  const RgbRegion r = decode_image_region(png.data(), png.size(), "png", [&](int, int) {
    ++asked;
    return CropBox{2, 2, 3, 3};
  });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(r.image.pixels, rgb);
  EXPECT_EQ(r.top, 0);
  EXPECT_EQ(r.left, 0);
}

// The odd JPEGs and PNGs of the image fuzzer's seeds (fuzz/make_corpus.py: 4:2:0, 4:2:2 and 4:4:4
// subsampling, grayscale, progressive, restart markers, optimised Huffman tables; RGBA, gray,
// gray + alpha, palette, 1-bit, 16-bit and interlaced PNGs) decode to their 12 x 10 (the
// interlaced one 1 x 1) RGB pixels, both whole and as a region; the CMYK one is refused, and so
// is the fuzzer's find kept as a seed, a PNG whose text chunk claims 576 MiB.
TEST(ImageCodec, TheFuzzSeedsDecode) {
  const std::filesystem::path dir = "fuzz/corpus/image";
  ASSERT_TRUE(std::filesystem::exists(dir)) << "run from the project's root";
  int decoded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "cmyk.jpg") {
      EXPECT_NE(trident::test_support::error_of([&] { read_image_file(entry.path().string()); }).find("CMYK"),
                std::string::npos);
      continue;
    }
    if (name == "png_huge_ancillary_chunk.png") {
      EXPECT_NE(trident::test_support::error_of([&] { read_image_file(entry.path().string()); })
                    .find("claims 603979776 bytes, more than the file holds"),
                std::string::npos);
      continue;
    }
    const RgbImage image = read_image_file(entry.path().string());
    const bool tiny = name == "interlaced.png";
    EXPECT_EQ(image.width, tiny ? 1 : 12) << name;
    EXPECT_EQ(image.height, tiny ? 1 : 10) << name;
    EXPECT_EQ(image.pixels.size(), size_t(image.width) * image.height * 3) << name;
    const RgbRegion region = read_image_region(entry.path().string(), [&](int h, int w) {
      return CropBox{h / 3, w / 3, std::max(1, h / 2), std::max(1, w / 2)};
    });
    EXPECT_EQ(region.full_width, image.width) << name;
    ++decoded;
  }
  EXPECT_EQ(decoded, 15);
}
