// JPEG and PNG files to 8-bit RGB pixels and back: the one file that talks to libjpeg-turbo
// and libpng, so no other code depends on either library's API or its setjmp error handling.
// Decoding converts everything to three channels the way PIL's convert("RGB") does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trident::data {

// Pixels row by row, three bytes (R, G, B) each: height * width * 3 bytes.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
};

// A rectangle of an image in whole pixels.
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// Part of a decoded image: `image` holds the pixels of the rectangle at (top, left) of an image
// of full_height x full_width.
struct RgbRegion {
  RgbImage image;
  int full_height = 0, full_width = 0, top = 0, left = 0;
};

// Decoded images beyond this many pixels are refused (a crafted header must not make every
// worker allocate gigabytes); PIL warns of a decompression bomb at about the same size.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// True when `name` ends in .jpg, .jpeg or .png (any case): the files an image folder holds.
bool has_image_extension(const std::string& name);

// Decodes a JPEG or a PNG, told apart by their signature bytes, not by the file name.
// Grayscale, grayscale with alpha, palette and RGBA PNGs become RGB (alpha dropped, 16-bit
// samples cut to their high byte); grayscale and YCbCr JPEGs become RGB. Throws trident::Error
// naming `what` for anything else: another format, a CMYK JPEG, damaged data or an image
// larger than kMaxImagePixels.
RgbImage decode_image(const uint8_t* bytes, size_t size, const std::string& what);

// Reads the file at `path` whole and decodes it; an unreadable file is an Error naming it.
RgbImage read_image_file(const std::string& path);

// Decodes at least the rectangle want(height, width) of the image, asked once the header has
// given its size (a box outside the image decodes it whole). A JPEG decodes only that part —
// the rows above it skipped, the columns cut to whole MCUs, a margin of two pixels for the
// chroma upsampling's neighbours, the rows below never read — so the rectangle's pixels are
// those of a whole decode, bit for bit, for a fraction of the work (a training crop's); a PNG
// decodes whole (`want` is still asked). Errors as decode_image and read_image_file.
RgbRegion decode_image_region(const uint8_t* bytes, size_t size, const std::string& what,
                              const std::function<CropBox(int height, int width)>& want);
RgbRegion read_image_region(const std::string& path, const std::function<CropBox(int height, int width)>& want);

// Encoders, for tests and benchmarks that make their own image folders. `channels` bytes per
// pixel: PNG 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA), or 1 with `palette` (RGB
// triples, at most 256) for a palette image whose pixels are indices; JPEG 1 (gray), 3 (RGB)
// or 4 (CMYK, Adobe-inverted as Photoshop writes it), at `quality` 1..100.
std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels,
                                const std::vector<uint8_t>& palette = {});
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels,
                                 int quality);

}  // namespace trident::data
