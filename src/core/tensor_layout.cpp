// The layout conversions of core/tensor_layout.h: one element-sized copy per output element,
// walking the output in order, so writes are sequential and reads follow the permuted strides.
#include "core/tensor_layout.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace trident {

namespace {

// Permutes the axes of a 4-D array of `es`-byte elements: out[i0,i1,i2,i3] = in[...] with
// in's strides picked by `perm`; `shape` is in's.
void permute4(const std::byte* src, const Shape& shape, size_t es, const int perm[4], std::byte* dst) {
  int64_t out_shape[4], in_stride[4];
  for (int i = 0; i < 4; ++i) out_shape[i] = shape[perm[i]];
  in_stride[3] = 1;
  for (int i = 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * shape[i + 1];
  const int64_t s0 = in_stride[perm[0]], s1 = in_stride[perm[1]], s2 = in_stride[perm[2]], s3 = in_stride[perm[3]];
  for (int64_t a = 0; a < out_shape[0]; ++a)
    for (int64_t b = 0; b < out_shape[1]; ++b)
      for (int64_t c = 0; c < out_shape[2]; ++c)
        for (int64_t d = 0; d < out_shape[3]; ++d, dst += es)
          std::memcpy(dst, src + (a * s0 + b * s1 + c * s2 + d * s3) * es, es);
}

HostTensor permute4(const HostTensor& t, const int perm[4]) {
  if (t.shape.size() != 4) return t;
  Shape out_shape(4);
  for (int i = 0; i < 4; ++i) out_shape[i] = t.shape[perm[i]];
  HostTensor out{out_shape, t.dtype, std::vector<std::byte>(t.data.size())};
  permute4(t.data.data(), t.shape, dtype_size(t.dtype), perm, out.data.data());
  return out;
}

constexpr int kToChannelsLast[4] = {0, 2, 3, 1};
constexpr int kToChannelsFirst[4] = {0, 3, 1, 2};

}  // namespace

HostTensor nchw_to_nhwc(const HostTensor& t) { return permute4(t, kToChannelsLast); }

HostTensor nhwc_to_nchw(const HostTensor& t) { return permute4(t, kToChannelsFirst); }

HostTensor ohwi_to_oihw(const HostTensor& w) { return permute4(w, kToChannelsFirst); }

HostTensor oihw_to_ohwi(const HostTensor& w) { return permute4(w, kToChannelsLast); }

namespace {

// The matrix [out, a·b·c·…] seen as 4-D [out, d1, d2, d3], permuted, and flattened back.
HostTensor permute_columns(const HostTensor& w, const Shape& as4d, const int perm[4]) {
  if (w.shape.size() != 2 || w.shape[1] != as4d[1] * as4d[2] * as4d[3] || w.shape[0] != as4d[0])
    throw Error("a " + shape_str(w.shape) + " matrix does not have " + std::to_string(as4d[1] * as4d[2] * as4d[3]) +
                " flattened columns");
  HostTensor view{as4d, w.dtype, w.data};
  HostTensor out = permute4(view, perm);
  out.shape = w.shape;
  return out;
}

}  // namespace

HostTensor hwc_columns_to_chw(const HostTensor& w, int64_t C, int64_t H, int64_t W) {
  return permute_columns(w, {w.shape.at(0), H, W, C}, kToChannelsFirst);
}

HostTensor chw_columns_to_hwc(const HostTensor& w, int64_t C, int64_t H, int64_t W) {
  return permute_columns(w, {w.shape.at(0), C, H, W}, kToChannelsLast);
}

std::vector<float> oihw_to_ohwi(const std::vector<float>& w, const Shape& oihw) {
  std::vector<float> out(w.size());
  permute4(reinterpret_cast<const std::byte*>(w.data()), oihw, sizeof(float), kToChannelsLast,
           reinterpret_cast<std::byte*>(out.data()));
  return out;
}

std::vector<float> transpose_2d(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> out(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = m[r * cols + c];
  return out;
}

}  // namespace trident
