// The resize passes used in production: explicit SIMD with runtime dispatch (Highway
// compiles this file once per x86 target and picks the best the CPU has at run time).
// Same integer arithmetic as the scalar reference in resize.cc (tests compare them byte
// for byte on random inputs): products are exact in int32 and sums do not depend on
// their order, so lanes may add taps in any order.
//
// The vertical pass is SIMD over the bytes of a row (each output row is a weighted sum
// of input rows), about 3x the scalar reference. The horizontal pass is still scalar
// code (three accumulators in registers); a SIMD version for interleaved RGB is the
// next step.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stoker/vision/resize_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>


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

inline uint8_t Clip8(int32_t acc, int precision) {
  const int32_t v = acc >> precision;  // arithmetic shift: floor division
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

void VerticalPass(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                  uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(VerticalPassSimd)(src, width, channels, taps, dst);
}

void HorizontalPass(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                    uint8_t* dst) {
  if (channels != 3) {
    HorizontalPassScalar(src, rows, channels, taps, dst);
    return;
  }
  // RGB: one accumulator per channel kept in registers while walking the taps once.
  // (A transpose + vertical SIMD kernel measured slower than this loop: the two
  // transposes cost more than the taps.)
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t in_stride = static_cast<size_t>(taps.in_size) * 3;
  const size_t out_stride = static_cast<size_t>(taps.out_size) * 3;
  const int32_t* weights = taps.weights.data();
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + in_stride * y;
    uint8_t* out = dst + out_stride * y;
    for (int x = 0; x < taps.out_size; ++x, out += 3) {
      const int32_t* k = weights + static_cast<size_t>(x) * taps.max_taps;
      const uint8_t* p = in + static_cast<size_t>(taps.start[x]) * 3;
      const int n = taps.count[x];
      int32_t r = bias, g = bias, b = bias;
      for (int j = 0; j < n; ++j, p += 3) {
        r += p[0] * k[j];
        g += p[1] * k[j];
        b += p[2] * k[j];
      }
      out[0] = Clip8(r, precision);
      out[1] = Clip8(g, precision);
      out[2] = Clip8(b, precision);
    }
  }
}

}  // namespace stoker::vision
#endif  // HWY_ONCE
