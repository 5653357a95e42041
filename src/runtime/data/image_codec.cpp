// libjpeg-turbo and libpng behind one interface (see image_codec.h).
// Both libraries report errors by longjmp. Each setjmp sits in a small "trapped" function whose
// locals are all trivial, writing only through pointers to objects its caller owns, so the jump
// never skips a destructor or leaves a modified local indeterminate; the caller turns the
// library's message into a trident::Error and releases the library's state in a guard.
#include "runtime/data/image_codec.h"

#include <png.h>
#include <jpeglib.h>
#include <jerror.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/input_file.h"
#include "core/printable.h"

namespace trident::data {

namespace {

// Where a library's error handler jumps to, with the message it leaves.
struct ErrorTrap {
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void over_limit(uint64_t file_bytes, uint64_t height, uint64_t width, uint64_t max_bytes,
                             const std::string& what) {
  throw Error(what + " is " + std::to_string(width) + "x" + std::to_string(height) + " pixels, which take " +
              std::to_string(decode_bytes(file_bytes, static_cast<int64_t>(height), static_cast<int64_t>(width)) >> 20) +
              " MiB to decode, more than the " + std::to_string(max_bytes >> 20) + " MiB a decode may hold here");
}

void check_pixel_count(uint64_t width, uint64_t height, const std::string& what) {
  if (width == 0 || height == 0 || width * height > static_cast<uint64_t>(kMaxImagePixels))
    throw Error(what + " is " + std::to_string(width) + "x" + std::to_string(height) +
                " pixels, outside the 1 to " + std::to_string(kMaxImagePixels) + " pixels trident decodes");
}

bool starts_with(const uint8_t* bytes, size_t size, const void* signature, size_t n) {
  return size >= n && std::memcmp(bytes, signature, n) == 0;
}

// ---- JPEG (libjpeg API of libjpeg-turbo) -------------------------------------------------

[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo);

void jpeg_on_message(j_common_ptr cinfo, int level);

struct JpegTrap {
  jpeg_error_mgr mgr;  // first, so the library's pointer to it is a pointer to the trap
  ErrorTrap trap;
  jpeg_progress_mgr progress;  // counts the scans of a progressive image

  // The error manager for a (de)compress struct's `err`: errors jump to `trap`.
  jpeg_error_mgr* arm() {
    jpeg_std_error(&mgr);
    mgr.error_exit = jpeg_error_exit;
    mgr.emit_message = jpeg_on_message;
    return &mgr;
  }
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* t = reinterpret_cast<JpegTrap*>(cinfo->err);
  cinfo->err->format_message(cinfo, t->trap.message);
  std::longjmp(t->trap.jump, 1);
}

// Warnings such as extraneous bytes before a marker are tolerated, as PIL tolerates them; a file
// that ends before its image data does is refused, as PIL refuses it by default. libjpeg would fill
// the rest with grey, and its header may promise 40 M pixels from a few hundred bytes.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->err->msg_code != JWRN_JPEG_EOF) return;
  auto* t = reinterpret_cast<JpegTrap*>(cinfo->err);
  std::snprintf(t->trap.message, sizeof t->trap.message, "the file ends before its image data does (truncated)");
  std::longjmp(t->trap.jump, 1);
}

// Called by the decoder as it works: a progressive image past kMaxJpegScans scans is stopped
// through the error path, before it spends minutes on scans of nothing.
void jpeg_count_scans(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    auto* t = reinterpret_cast<JpegTrap*>(cinfo->err);
    std::snprintf(t->trap.message, sizeof t->trap.message, "it has more than %d scans", kMaxJpegScans);
    std::longjmp(t->trap.jump, 1);
  }
}

struct DecompressGuard {
  jpeg_decompress_struct* cinfo;
  ~DecompressGuard() { jpeg_destroy_decompress(cinfo); }
};

enum class JpegOutcome { Decoded, LibraryError, Cmyk, TooLarge, OverLimit };

using RegionWanted = std::function<CropBox(int height, int width)>;

// Pixels beyond a wanted rectangle that a partial decode also makes: the fancy (triangle)
// chroma upsampling reads one neighbour each side, which a cut-off decode lacks at its edges.
constexpr int kRegionMargin = 2;

// The whole image, or (want given) the wanted rectangle and its margin: rows above it skipped,
// columns cut to whole MCUs by jpeg_crop_scanline, rows below it never decoded.
JpegOutcome decode_jpeg_trapped(jpeg_decompress_struct* cinfo, JpegTrap* t, const uint8_t* bytes,
                                size_t size, const RegionWanted* want, uint64_t max_bytes, RgbRegion* out) {
  if (setjmp(t->trap.jump)) return JpegOutcome::LibraryError;
  jpeg_mem_src(cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) return JpegOutcome::Cmyk;
  if (uint64_t{cinfo->image_width} * cinfo->image_height > static_cast<uint64_t>(kMaxImagePixels))
    return JpegOutcome::TooLarge;
  if (decode_bytes(size, cinfo->image_height, cinfo->image_width) > max_bytes) return JpegOutcome::OverLimit;
  const int H = static_cast<int>(cinfo->image_height), W = static_cast<int>(cinfo->image_width);
  out->full_height = H;
  out->full_width = W;
  int y0 = 0, y1 = H, x0 = 0, x1 = W;
  if (want) {
    const CropBox b = (*want)(H, W);
    if (b.top >= 0 && b.left >= 0 && b.height > 0 && b.width > 0 && b.top + b.height <= H && b.left + b.width <= W) {
      y0 = std::max(b.top - kRegionMargin, 0);
      y1 = std::min(b.top + b.height + kRegionMargin, H);
      x0 = std::max(b.left - kRegionMargin, 0);
      x1 = std::min(b.left + b.width + kRegionMargin, W);
    }
  }
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  JDIMENSION left = static_cast<JDIMENSION>(x0), width = static_cast<JDIMENSION>(x1 - x0);
  if (x0 > 0 || x1 < W) jpeg_crop_scanline(cinfo, &left, &width);  // widens to whole MCUs
  if (y0 > 0 && jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y0)) != static_cast<JDIMENSION>(y0))
    return JpegOutcome::LibraryError;
  out->top = y0;
  out->left = static_cast<int>(left);
  RgbImage& img = out->image;
  img.width = static_cast<int>(cinfo->output_width);
  img.height = y1 - y0;
  img.pixels.resize(size_t{cinfo->output_width} * static_cast<size_t>(img.height) * 3);
  while (static_cast<int>(cinfo->output_scanline) < y1) {
    JSAMPROW row = img.pixels.data() + size_t{cinfo->output_scanline - static_cast<JDIMENSION>(y0)} * cinfo->output_width * 3;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  if (y1 == H)
    jpeg_finish_decompress(cinfo);
  else
    jpeg_abort_decompress(cinfo);  // the rows below the region are not needed
  return JpegOutcome::Decoded;
}

RgbRegion decode_jpeg(const uint8_t* bytes, size_t size, const std::string& what, const RegionWanted* want,
                      uint64_t max_bytes) {
  jpeg_decompress_struct cinfo;
  JpegTrap t;
  cinfo.err = t.arm();
  jpeg_create_decompress(&cinfo);
  DecompressGuard guard{&cinfo};
  t.progress.progress_monitor = jpeg_count_scans;
  cinfo.progress = &t.progress;
  RgbRegion img;
  switch (decode_jpeg_trapped(&cinfo, &t, bytes, size, want, max_bytes, &img)) {
    case JpegOutcome::Decoded: return img;
    case JpegOutcome::LibraryError: throw Error(what + " is not a readable JPEG: " + t.trap.message);
    case JpegOutcome::Cmyk:
      throw Error(what + " is a CMYK JPEG, which trident does not convert; save it as RGB");
    case JpegOutcome::TooLarge: check_pixel_count(cinfo.image_width, cinfo.image_height, what);
      break;
    case JpegOutcome::OverLimit: over_limit(size, cinfo.image_height, cinfo.image_width, max_bytes, what);
  }
  throw Error(what + ": unexpected JPEG decoder state");
}

// The header, and whether its coding is the plain kind (image_codec.h's JpegHeader).
bool read_jpeg_header_trapped(jpeg_decompress_struct* cinfo, JpegTrap* t, const uint8_t* bytes, size_t size) {
  if (setjmp(t->trap.jump)) return false;
  jpeg_mem_src(cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

bool plain_coding(const jpeg_decompress_struct& c) {
  if (c.progressive_mode || c.arith_code || c.data_precision != 8 || c.comps_in_scan != c.num_components) return false;
  if (c.num_components == 1) return c.jpeg_color_space == JCS_GRAYSCALE;
  if (c.num_components != 3 || c.jpeg_color_space != JCS_YCbCr) return false;
  const jpeg_component_info* k = c.comp_info;
  const bool luma_ok = (k[0].h_samp_factor == 1 || k[0].h_samp_factor == 2) &&
                       (k[0].v_samp_factor == 1 || k[0].v_samp_factor == 2);
  return luma_ok && k[1].h_samp_factor == 1 && k[1].v_samp_factor == 1 && k[2].h_samp_factor == 1 &&
         k[2].v_samp_factor == 1;
}

JpegHeader jpeg_header(const uint8_t* bytes, size_t size, const std::string& what, uint64_t max_bytes) {
  jpeg_decompress_struct cinfo;
  JpegTrap t;
  cinfo.err = t.arm();
  jpeg_create_decompress(&cinfo);
  DecompressGuard guard{&cinfo};
  if (!read_jpeg_header_trapped(&cinfo, &t, bytes, size)) throw Error(what + " is not a readable JPEG: " + t.trap.message);
  check_pixel_count(cinfo.image_width, cinfo.image_height, what);
  if (decode_bytes(size, cinfo.image_height, cinfo.image_width) > max_bytes)
    over_limit(size, cinfo.image_height, cinfo.image_width, max_bytes, what);
  // A file that does not end in its end-of-image marker may be truncated: libjpeg-turbo refuses
  // that, where another decoder might fill the rest with grey.
  const bool complete = size >= 2 && bytes[size - 2] == 0xFF && bytes[size - 1] == 0xD9;
  return {static_cast<int>(cinfo.image_height), static_cast<int>(cinfo.image_width), complete && plain_coding(cinfo)};
}

struct CompressGuard {
  jpeg_compress_struct* cinfo;
  unsigned char** buffer;
  ~CompressGuard() {
    jpeg_destroy_compress(cinfo);
    std::free(*buffer);  // jpeg_mem_dest's buffer is malloc'ed by the library
  }
};

bool encode_jpeg_trapped(jpeg_compress_struct* cinfo, JpegTrap* t, const uint8_t* pixels, int width,
                         int height, int channels, int quality, bool progressive, int restart_rows,
                         unsigned char** buffer, unsigned long* size) {
  if (setjmp(t->trap.jump)) return false;
  jpeg_mem_dest(cinfo, buffer, size);
  cinfo->image_width = static_cast<JDIMENSION>(width);
  cinfo->image_height = static_cast<JDIMENSION>(height);
  cinfo->input_components = channels;
  cinfo->in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(cinfo);
  cinfo->restart_in_rows = restart_rows;
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + size_t{cinfo->next_scanline} * width * channels);
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

// ---- PNG (libpng 1.6) ----------------------------------------------------------------------

[[noreturn]] void png_error_exit(png_structp png, png_const_charp message) {
  auto* trap = static_cast<ErrorTrap*>(png_get_error_ptr(png));
  std::snprintf(trap->message, sizeof trap->message, "%s", message);
  std::longjmp(trap->jump, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

struct PngReader {
  const uint8_t* next;
  size_t left;
};

void png_read_from_memory(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->left) png_error(png, "the file ends early");
  std::memcpy(out, r->next, n);
  r->next += n;
  r->left -= n;
}

void png_write_to_vector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

void png_flush_nothing(png_structp) {}

struct PngGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  bool writing = false;
  ~PngGuard() {
    if (writing)
      png_destroy_write_struct(&png, &info);
    else
      png_destroy_read_struct(&png, &info, nullptr);
  }
};

enum class PngOutcome { Decoded, LibraryError, TooLarge, OverLimit };

PngOutcome decode_png_trapped(png_structp png, png_infop info, ErrorTrap* trap, PngReader* reader, uint64_t max_bytes,
                              RgbImage* out) {
  if (setjmp(trap->jump)) return PngOutcome::LibraryError;
  png_set_read_fn(png, reader, png_read_from_memory);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  if (uint64_t{width} * height > static_cast<uint64_t>(kMaxImagePixels)) return PngOutcome::TooLarge;
  if (decode_bytes(reader->left, height, width) > max_bytes) return PngOutcome::OverLimit;
  const int colour = png_get_color_type(png, info);
  png_set_strip_16(png);
  png_set_palette_to_rgb(png);
  png_set_expand_gray_1_2_4_to_8(png);
  if (colour == PNG_COLOR_TYPE_GRAY || colour == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_strip_alpha(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8)
    png_error(png, "its colour type does not convert to 8-bit RGB");
  out->width = static_cast<int>(width);
  out->height = static_cast<int>(height);
  out->pixels.resize(size_t{width} * height * 3);
  for (int pass = 0; pass < passes; ++pass)
    for (png_uint_32 y = 0; y < height; ++y) png_read_row(png, out->pixels.data() + size_t{y} * width * 3, nullptr);
  png_read_end(png, nullptr);
  return PngOutcome::Decoded;
}

// libpng allocates a chunk's declared length before reading it, so a 124-byte file whose text
// chunk claims 576 MiB cost that much (png_set_chunk_malloc_max did not stop it). Every chunk
// before the first IDAT must fit in the file; the image data is read in pieces and bounded by
// the decode share.
void check_png_chunk_lengths(const uint8_t* bytes, size_t size, const std::string& what) {
  size_t at = 8;  // after the signature
  while (at + 8 <= size) {
    const uint64_t length = png_get_uint_32(bytes + at);
    const std::string type(reinterpret_cast<const char*>(bytes + at + 4), 4);
    if (type == "IDAT") return;
    if (length + 12 > size - at)
      throw Error(what + ": its PNG chunk '" + printable(type) + "' claims " + std::to_string(length) +
                  " bytes, more than the file holds");
    at += static_cast<size_t>(length) + 12;
  }
}

RgbImage decode_png(const uint8_t* bytes, size_t size, const std::string& what, uint64_t max_bytes) {
  check_png_chunk_lengths(bytes, size, what);
  ErrorTrap trap;
  PngGuard g;
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &trap, png_error_exit, png_ignore_warning);
  if (g.png) g.info = png_create_info_struct(g.png);
  if (!g.png || !g.info) throw Error("libpng could not start decoding " + what);
  png_set_user_limits(g.png, 1u << 24, 1u << 24);
  // An ancillary chunk (text, ICC profile) may decompress to at most 1 MiB, and a file may
  // hold at most 1000 of them.
  png_set_chunk_malloc_max(g.png, 1u << 20);
  png_set_chunk_cache_max(g.png, 1000);
  PngReader reader{bytes, size};
  RgbImage img;
  switch (decode_png_trapped(g.png, g.info, &trap, &reader, max_bytes, &img)) {
    case PngOutcome::Decoded: return img;
    case PngOutcome::LibraryError: throw Error(what + " is not a readable PNG: " + trap.message);
    case PngOutcome::TooLarge:
      check_pixel_count(png_get_image_width(g.png, g.info), png_get_image_height(g.png, g.info), what);
      break;
    case PngOutcome::OverLimit:
      over_limit(size, png_get_image_height(g.png, g.info), png_get_image_width(g.png, g.info), max_bytes, what);
  }
  throw Error(what + ": unexpected PNG decoder state");
}

bool encode_png_trapped(png_structp png, png_infop info, ErrorTrap* trap, const uint8_t* pixels, int width,
                        int height, int channels, const std::vector<uint8_t>* palette, std::vector<uint8_t>* out) {
  if (setjmp(trap->jump)) return false;
  png_set_write_fn(png, out, png_write_to_vector, png_flush_nothing);
  const int colour = !palette->empty() ? PNG_COLOR_TYPE_PALETTE
                     : channels == 1   ? PNG_COLOR_TYPE_GRAY
                     : channels == 2   ? PNG_COLOR_TYPE_GRAY_ALPHA
                     : channels == 3   ? PNG_COLOR_TYPE_RGB
                                       : PNG_COLOR_TYPE_RGB_ALPHA;
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, colour,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette->empty()) {
    png_color entries[256];
    const int n = static_cast<int>(palette->size() / 3);
    for (int i = 0; i < n; ++i) entries[i] = {(*palette)[3 * i], (*palette)[3 * i + 1], (*palette)[3 * i + 2]};
    png_set_PLTE(png, info, entries, n);
  }
  png_write_info(png, info);
  for (int y = 0; y < height; ++y)
    png_write_row(png, pixels + size_t(y) * width * channels);
  png_write_end(png, nullptr);
  return true;
}

void check_encode_arguments(int width, int height, int channels, bool channels_ok, const char* format) {
  if (width < 1 || height < 1 || !channels_ok || int64_t{width} * height > kMaxImagePixels)
    throw Error(std::string("cannot encode a ") + std::to_string(width) + "x" + std::to_string(height) +
                " " + format + " with " + std::to_string(channels) + " channels");
}

}  // namespace

bool has_image_extension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.ends_with(".jpg") || lower.ends_with(".jpeg") || lower.ends_with(".png");
}

namespace {

constexpr uint8_t kJpeg[] = {0xFF, 0xD8, 0xFF};
constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

RgbRegion decode_any(const uint8_t* bytes, size_t size, const std::string& what, const RegionWanted* want,
                     uint64_t max_bytes) {
  if (starts_with(bytes, size, kJpeg, sizeof kJpeg)) return decode_jpeg(bytes, size, what, want, max_bytes);
  if (starts_with(bytes, size, kPng, sizeof kPng)) {
    RgbRegion whole;
    whole.image = decode_png(bytes, size, what, max_bytes);
    whole.full_height = whole.image.height;
    whole.full_width = whole.image.width;
    if (want) (*want)(whole.full_height, whole.full_width);  // asked as for a JPEG; the whole image serves
    return whole;
  }
  throw Error(what + " is neither a JPEG nor a PNG (its first bytes are no signature of either)");
}

// The checked opener, the size cap, the signature from the first bytes, then the rest.
std::vector<uint8_t> read_signed_file(const std::string& path, const DecodeLimits& limits) {
  const std::string what = quoted_name(path);
  const InputFile file(path, "image");
  if (file.size() > kMaxImageFileBytes || file.size() > limits.max_bytes)
    throw Error(what + " is " + std::to_string(file.size() >> 20) + " MiB, larger than the " +
                std::to_string(std::min(kMaxImageFileBytes, limits.max_bytes) >> 20) + " MiB an image may be");
  uint8_t head[sizeof kPng] = {};
  const size_t head_size = static_cast<size_t>(std::min<uint64_t>(file.size(), sizeof head));
  file.read_at(0, head_size, head);
  if (!starts_with(head, head_size, kJpeg, sizeof kJpeg) && !starts_with(head, head_size, kPng, sizeof kPng))
    throw Error(what + " is neither a JPEG nor a PNG (its first bytes are no signature of either)");
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  file.read_at(0, bytes.size(), bytes.data());
  return bytes;
}

RgbRegion read_any(const std::string& path, const RegionWanted* want, const DecodeLimits& limits) {
  const std::vector<uint8_t> bytes = read_signed_file(path, limits);
  return decode_any(bytes.data(), bytes.size(), quoted_name(path), want, limits.max_bytes);
}

}  // namespace

uint64_t decode_bytes(uint64_t file_bytes, int64_t height, int64_t width) {
  return file_bytes + static_cast<uint64_t>(std::max<int64_t>(height, 0)) * static_cast<uint64_t>(std::max<int64_t>(width, 0)) * 3;
}

RgbImage decode_image(const uint8_t* bytes, size_t size, const std::string& what, const DecodeLimits& limits) {
  return decode_any(bytes, size, what, nullptr, limits.max_bytes).image;
}

RgbImage read_image_file(const std::string& path, const DecodeLimits& limits) {
  return read_any(path, nullptr, limits).image;
}

RgbRegion decode_image_region(const uint8_t* bytes, size_t size, const std::string& what, const RegionWanted& want,
                              const DecodeLimits& limits) {
  return decode_any(bytes, size, what, &want, limits.max_bytes);
}

RgbRegion read_image_region(const std::string& path, const RegionWanted& want, const DecodeLimits& limits) {
  return read_any(path, &want, limits);
}

std::vector<uint8_t> read_image_bytes(const std::string& path, const DecodeLimits& limits) {
  return read_signed_file(path, limits);
}

std::optional<JpegHeader> read_jpeg_header(const uint8_t* bytes, size_t size, const std::string& what,
                                           const DecodeLimits& limits) {
  if (starts_with(bytes, size, kPng, sizeof kPng)) return std::nullopt;
  if (!starts_with(bytes, size, kJpeg, sizeof kJpeg))
    throw Error(what + " is neither a JPEG nor a PNG (its first bytes are no signature of either)");
  return jpeg_header(bytes, size, what, limits.max_bytes);
}

std::vector<uint8_t> encode_png(const uint8_t* pixels, int width, int height, int channels,
                                const std::vector<uint8_t>& palette) {
  const bool palette_ok = palette.empty() || (channels == 1 && palette.size() % 3 == 0 && palette.size() <= 768);
  check_encode_arguments(width, height, channels, channels >= 1 && channels <= 4 && palette_ok, "PNG");
  ErrorTrap trap;
  PngGuard g;
  g.writing = true;
  g.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &trap, png_error_exit, png_ignore_warning);
  if (g.png) g.info = png_create_info_struct(g.png);
  if (!g.png || !g.info) throw Error("libpng could not start encoding a PNG");
  png_set_user_limits(g.png, 1u << 24, 1u << 24);  // what the decoder accepts, not libpng's million
  std::vector<uint8_t> out;
  if (!encode_png_trapped(g.png, g.info, &trap, pixels, width, height, channels, &palette, &out))
    throw Error(std::string("libpng could not encode a PNG: ") + trap.message);
  return out;
}

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels, int quality,
                                 bool progressive, int restart_rows) {
  check_encode_arguments(width, height, channels,
                         (channels == 1 || channels == 3 || channels == 4) && quality >= 1 && quality <= 100, "JPEG");
  jpeg_compress_struct cinfo;
  JpegTrap t;
  cinfo.err = t.arm();
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  CompressGuard guard{&cinfo, &buffer};
  if (!encode_jpeg_trapped(&cinfo, &t, pixels, width, height, channels, quality, progressive,
                           std::clamp(restart_rows, 0, 65535), &buffer, &size))
    throw Error(std::string("libjpeg could not encode a JPEG: ") + t.trap.message);
  return std::vector<uint8_t>(buffer, buffer + size);
}

}  // namespace trident::data
