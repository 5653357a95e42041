// resize_channels and channel_shuffle on the GPU: one thread per output value, so stores are
// coalesced (rows one pack wide: one thread per row); the index split into (row, channel) is 32-bit where the tensor allows. Values are
// moved as raw bits (no conversion), and new channels get all-zero bits, +0 in f32, f16 and bf16.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/channel_resize.h"
#include "backends/cuda/device/common.cuh"

namespace trident::cuda::device {

namespace {

template <class Bits, class Index>
__global__ void resize_channels_kernel(const Bits* __restrict__ x, Bits* __restrict__ y, Index total, Index from,
                                       Index to) {
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const Index row = i / to, c = i - row * to;
    y[i] = c < from ? x[row * from + c] : Bits(0);
  }
}

// Widening rows that are one 8- or 16-byte pack wide (the 3-channel image padded to a whole
// vector for the first convolution): one thread per row reads its `from` values and writes the
// row as a single store, instead of one thread and one division per value.
template <class Bits, int kWidth>
__global__ void widen_rows_kernel(const Bits* __restrict__ x, Bits* __restrict__ y, int64_t rows, int from) {
  struct alignas(sizeof(Bits) * kWidth) Row {
    Bits v[kWidth];
  };
  for (int64_t r = grid_start(); r < rows; r += grid_stride()) {
    Row out;
    for (int c = 0; c < kWidth; ++c) out.v[c] = c < from ? x[r * from + c] : Bits(0);
    reinterpret_cast<Row*>(y)[r] = out;
  }
}

template <class Bits>
void launch_typed(const void* x, void* y, int64_t rows, int64_t from, int64_t to, cudaStream_t stream) {
  const int64_t total = rows * to;
  const auto* src = static_cast<const Bits*>(x);
  auto* dst = static_cast<Bits*>(y);
  const int64_t row_bytes = to * static_cast<int64_t>(sizeof(Bits));
  if (from < to && (row_bytes == 8 || row_bytes == 16) && reinterpret_cast<uintptr_t>(y) % row_bytes == 0) {
    if (row_bytes == 16)
      widen_rows_kernel<Bits, 16 / sizeof(Bits)><<<grid_for(rows), kThreads, 0, stream>>>(src, dst, rows, static_cast<int>(from));
    else
      widen_rows_kernel<Bits, 8 / sizeof(Bits)><<<grid_for(rows), kThreads, 0, stream>>>(src, dst, rows, static_cast<int>(from));
    return;
  }
  if (rows * std::max(from, to) < (int64_t{1} << 31))
    resize_channels_kernel<Bits, uint32_t><<<grid_for(total), kThreads, 0, stream>>>(
        src, dst, static_cast<uint32_t>(total), static_cast<uint32_t>(from), static_cast<uint32_t>(to));
  else
    resize_channels_kernel<Bits, int64_t><<<grid_for(total), kThreads, 0, stream>>>(src, dst, total, from, to);
}

template <class Bits>
__global__ void channel_shuffle_kernel(const Bits* __restrict__ x, Bits* __restrict__ y, int64_t total, int64_t channels,
                                       int64_t groups) {
  const int64_t per = channels / groups;
  for (int64_t o = grid_start(); o < total; o += grid_stride()) {
    const int64_t row = o / channels, c = o - row * channels;  // c = j·groups + i
    const int64_t j = c / groups, i = c - j * groups;
    y[o] = x[row * channels + i * per + j];
  }
}

}  // namespace

void launch_channel_shuffle(const void* x, void* y, int64_t rows, int64_t channels, int64_t groups,
                            size_t element_bytes, cudaStream_t stream) {
  const int64_t total = rows * channels;
  if (total <= 0) return;
  if (element_bytes == 2)
    channel_shuffle_kernel<uint16_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), total, channels, groups);
  else if (element_bytes == 4)
    channel_shuffle_kernel<uint32_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), total, channels, groups);
  else
    throw Error("channel_shuffle moves 2- or 4-byte values, not " + std::to_string(element_bytes) + "-byte ones");
  check_launch("channel_shuffle_kernel");
}

void launch_resize_channels(const void* x, void* y, int64_t rows, int64_t from, int64_t to, size_t element_bytes,
                            cudaStream_t stream) {
  if (rows <= 0 || to <= 0) return;
  if (element_bytes == 2) launch_typed<uint16_t>(x, y, rows, from, to, stream);
  else if (element_bytes == 4) launch_typed<uint32_t>(x, y, rows, from, to, stream);
  else throw Error("resize_channels moves 2- or 4-byte values, not " + std::to_string(element_bytes) + "-byte ones");
  check_launch("resize_channels_kernel");
}

}  // namespace trident::cuda::device
