// The axis permutations of core/tensor_layout.h: one element-sized copy per output element,
// walking the output in order, so writes are sequential and reads follow the permuted strides.
#include "core/tensor_layout.h"

#include <cstring>

namespace trident {

namespace {

// Permutes a 4-D tensor's axes: out[i0,i1,i2,i3] = in[...] with in's strides picked by `perm`.
HostTensor permute4(const HostTensor& t, const int perm[4]) {
  if (t.shape.size() != 4) return t;
  const size_t es = dtype_size(t.dtype);
  Shape out_shape(4);
  for (int i = 0; i < 4; ++i) out_shape[i] = t.shape[perm[i]];
  int64_t in_stride[4];
  in_stride[3] = 1;
  for (int i = 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * t.shape[i + 1];
  HostTensor out{out_shape, t.dtype, std::vector<std::byte>(t.data.size())};
  const int64_t s0 = in_stride[perm[0]], s1 = in_stride[perm[1]], s2 = in_stride[perm[2]], s3 = in_stride[perm[3]];
  std::byte* dst = out.data.data();
  for (int64_t a = 0; a < out_shape[0]; ++a)
    for (int64_t b = 0; b < out_shape[1]; ++b)
      for (int64_t c = 0; c < out_shape[2]; ++c)
        for (int64_t d = 0; d < out_shape[3]; ++d, dst += es)
          std::memcpy(dst, t.data.data() + (a * s0 + b * s1 + c * s2 + d * s3) * es, es);
  return out;
}

}  // namespace

HostTensor nchw_to_nhwc(const HostTensor& t) {
  static const int perm[4] = {0, 2, 3, 1};
  return permute4(t, perm);
}

HostTensor nhwc_to_nchw(const HostTensor& t) {
  static const int perm[4] = {0, 3, 1, 2};
  return permute4(t, perm);
}

}  // namespace trident
