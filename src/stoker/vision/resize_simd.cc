// The resize passes used in production: explicit SIMD with runtime dispatch (Highway
// compiles this file once per x86 target and picks the best the CPU has at run time).
// Same integer arithmetic as the scalar reference in resize.cc (tests compare them byte
// for byte on random inputs): products are exact in int32 and sums do not depend on
// their order, so lanes may add taps in any order.
//
// The vertical pass is SIMD over the bytes of a row (each output row is a weighted sum
// of input rows). The horizontal pass reuses it on the transposed image: transposing
// pixels is cheap next to the taps and avoids gathers from interleaved RGB.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stoker/vision/resize_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstring>
#include <vector>

#include "stoker/vision/resize.h"

HWY_BEFORE_NAMESPACE();
namespace stoker::vision {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void VerticalPassSimd(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                      uint8_t* dst) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;  // as many uint8 lanes as int32 lanes
  const size_t lanes = hn::Lanes(di);
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t stride = static_cast<size_t>(width) * channels;
  const auto vbias = hn::Set(di, bias);
  for (int y = 0; y < taps.out_size; ++y) {
    const int32_t* k = &taps.weights[static_cast<size_t>(y) * taps.max_taps];
    const uint8_t* in = src + stride * taps.start[y];
    const int n = taps.count[y];
    uint8_t* out = dst + stride * y;
    size_t i = 0;
    for (; i + lanes <= stride; i += lanes) {
      auto acc = vbias;
      for (int j = 0; j < n; ++j) {
        const auto v = hn::PromoteTo(di, hn::LoadU(du8, in + stride * j + i));
        acc = hn::Add(acc, hn::Mul(v, hn::Set(di, k[j])));
      }
      // Arithmetic shift = floor division; DemoteTo saturates to [0, 255] (clip8).
      acc = hn::ShiftRightSame(acc, precision);
      hn::StoreU(hn::DemoteTo(du8, acc), du8, out + i);
    }
    for (; i < stride; ++i) {
      int32_t acc = bias;
      for (int j = 0; j < n; ++j) acc += static_cast<int32_t>(in[stride * j + i]) * k[j];
      const int32_t v = acc >> precision;
      out[i] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace stoker::vision
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoker::vision {

HWY_EXPORT(VerticalPassSimd);

namespace {

// rows x cols pixels of `channels` bytes -> cols x rows.
void TransposePixels(const uint8_t* src, int rows, int cols, int channels, uint8_t* dst) {
  constexpr int kBlock = 32;  // tiles keep both sides in cache
  for (int r0 = 0; r0 < rows; r0 += kBlock) {
    for (int c0 = 0; c0 < cols; c0 += kBlock) {
      const int r1 = r0 + kBlock < rows ? r0 + kBlock : rows;
      const int c1 = c0 + kBlock < cols ? c0 + kBlock : cols;
      for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; ++c) {
          std::memcpy(dst + (static_cast<size_t>(c) * rows + r) * channels,
                      src + (static_cast<size_t>(r) * cols + c) * channels, channels);
        }
      }
    }
  }
}

}  // namespace

void VerticalPass(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                  uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(VerticalPassSimd)(src, width, channels, taps, dst);
}

void HorizontalPass(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                    uint8_t* dst) {
  // Per-thread scratch for the two transposed images; grows to the largest seen.
  thread_local std::vector<uint8_t> columns, resized;
  columns.resize(static_cast<size_t>(taps.in_size) * rows * channels);
  resized.resize(static_cast<size_t>(taps.out_size) * rows * channels);
  TransposePixels(src, rows, taps.in_size, channels, columns.data());
  VerticalPass(columns.data(), rows, channels, taps, resized.data());
  TransposePixels(resized.data(), taps.out_size, rows, channels, dst);
}

}  // namespace stoker::vision
#endif  // HWY_ONCE
