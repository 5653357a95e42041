// JPEG and PNG files to 8-bit RGB pixels and back: the one file that talks to libjpeg-turbo
// and libpng, so no other code depends on either library's API or its setjmp error handling.
// Decoding converts everything to three channels the way PIL's convert("RGB") does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
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
// Image files beyond this size are refused before a byte is read (a link to /dev/zero, a sparse
// file of gigabytes); a JPEG of kMaxImagePixels at the best quality is smaller.
inline constexpr uint64_t kMaxImageFileBytes = uint64_t{256} << 20;
// A progressive JPEG of more scans than this is refused: each scan passes over the whole image,
// so a small file of empty scans costs minutes (libjpeg-turbo's TurboJPEG API stops at 500 too).
inline constexpr int kMaxJpegScans = 500;

// What one decode may hold at once: the file's bytes and the decoded pixels. An image that needs
// more is refused (and an image folder's loader skips and counts it) before anything is allocated.
struct DecodeLimits {
  uint64_t max_bytes = kMaxImageFileBytes + static_cast<uint64_t>(kMaxImagePixels) * 3;
};
// The bytes decoding a file of `file_bytes` into `height` x `width` RGB pixels holds at its peak.
uint64_t decode_bytes(uint64_t file_bytes, int64_t height, int64_t width);

// True when `name` ends in .jpg, .jpeg or .png (any case): the files an image folder holds.
bool has_image_extension(const std::string& name);

// Decodes a JPEG or a PNG, told apart by their signature bytes, not by the file name.
// Grayscale, grayscale with alpha, palette and RGBA PNGs become RGB (alpha dropped, 16-bit
// samples cut to their high byte); grayscale and YCbCr JPEGs become RGB. Throws trident::Error
// naming `what` for anything else: another format, a CMYK JPEG, damaged data or an image
// larger than kMaxImagePixels.
RgbImage decode_image(const uint8_t* bytes, size_t size, const std::string& what, const DecodeLimits& limits = {});

// Reads the file at `path` and decodes it. The file is opened as every outside file is (a
// regular file, never a FIFO or a device: core/input_file.h), its size capped, its signature
// checked from the first bytes before the rest is read; an unreadable file is an Error naming it.
RgbImage read_image_file(const std::string& path, const DecodeLimits& limits = {});

// Decodes at least the rectangle want(height, width) of the image, asked once the header has
// given its size (a box outside the image decodes it whole). A JPEG decodes only that part —
// the rows above it skipped, the columns cut to whole MCUs, a margin of two pixels for the
// chroma upsampling's neighbours, the rows below never read — so the rectangle's pixels are
// those of a whole decode, bit for bit, for a fraction of the work (a training crop's); a PNG
// decodes whole (`want` is still asked). Errors as decode_image and read_image_file.
RgbRegion decode_image_region(const uint8_t* bytes, size_t size, const std::string& what,
                              const std::function<CropBox(int height, int width)>& want, const DecodeLimits& limits = {});
RgbRegion read_image_region(const std::string& path, const std::function<CropBox(int height, int width)>& want,
                            const DecodeLimits& limits = {});

// The bytes of the image file at `path`, read as read_image_file reads them (the checked opener,
// the size cap, a JPEG or PNG signature) but not decoded: for a decoder elsewhere (a GPU's).
std::vector<uint8_t> read_image_bytes(const std::string& path, const DecodeLimits& limits = {});

// What a JPEG's header says, for a decoder other than libjpeg-turbo. `plain` is the kind every
// JPEG decoder handles alike, a GPU's hardware decoder included: sequential Huffman coding,
// 8-bit samples, all components in the first scan, gray or YCbCr with 4:4:4, 4:2:2, 4:2:0 or
// 4:4:0 chroma, and the file ends in its end-of-image marker. Progressive, 12-bit, CMYK, Adobe
// RGB, 4:1:1 or truncated JPEGs are not plain (decode them with decode_image_region).
struct JpegHeader {
  int height = 0, width = 0;
  bool plain = false;
};
// The header of the JPEG in `bytes`; nullopt for a PNG. An Error naming `what` for a header that
// cannot be read, another format, or an image past kMaxImagePixels or `limits`.
std::optional<JpegHeader> read_jpeg_header(const uint8_t* bytes, size_t size, const std::string& what,
                                           const DecodeLimits& limits = {});

// Encoders, for tests and benchmarks that make their own image folders. `channels` bytes per
// pixel: PNG 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA), or 1 with `palette` (RGB
// triples, at most 256) for a palette image whose pixels are indices; JPEG 1 (gray), 3 (RGB)
// or 4 (CMYK, Adobe-inverted as Photoshop writes it), at `quality` 1..100; `progressive` writes
// libjpeg's simple progression of scans, `restart_rows` a restart marker every that many MCU rows.
std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels,
                                const std::vector<uint8_t>& palette = {});
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels,
                                 int quality, bool progressive = false, int restart_rows = 0);

}  // namespace trident::data
