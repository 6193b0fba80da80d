// The resize passes used in production. Same integer arithmetic as the scalar
// reference in resize.cc (tests compare them byte for byte on random inputs), laid out
// so the compiler can vectorise: the vertical pass sweeps whole rows tap by tap into an
// int32 accumulator row instead of walking down columns, and the horizontal pass keeps
// one accumulator per channel in registers.
//
// Portable C++ only for now: explicit SIMD with runtime dispatch (Highway) is the next
// step for these two functions.
#include <algorithm>
#include <vector>

#include "stoker/vision/resize.h"

namespace stoker::vision {

namespace {

inline uint8_t Clip8(int32_t acc, int precision) {
  const int32_t v = acc >> precision;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

void HorizontalPass(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                    uint8_t* dst) {
  if (channels != 3) {
    HorizontalPassScalar(src, rows, channels, taps, dst);
    return;
  }
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t in_stride = static_cast<size_t>(taps.in_size) * 3;
  const size_t out_stride = static_cast<size_t>(taps.out_size) * 3;
  const int32_t* weights = taps.weights.data();
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + in_stride * y;
    uint8_t* out = dst + out_stride * y;
    for (int x = 0; x < taps.out_size; ++x) {
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
      out += 3;
    }
  }
}

void VerticalPass(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                  uint8_t* dst) {
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t stride = static_cast<size_t>(width) * channels;
  thread_local std::vector<int32_t> acc;  // one row; grows to the widest image seen
  acc.resize(stride);
  int32_t* a = acc.data();
  for (int y = 0; y < taps.out_size; ++y) {
    const int32_t* k = &taps.weights[static_cast<size_t>(y) * taps.max_taps];
    const uint8_t* in = src + stride * taps.start[y];
    const int n = taps.count[y];
    std::fill(a, a + stride, bias);
    for (int j = 0; j < n; ++j) {
      const uint8_t* row = in + stride * j;
      const int32_t w = k[j];
      for (size_t i = 0; i < stride; ++i) a[i] += row[i] * w;
    }
    uint8_t* out = dst + stride * y;
    for (size_t i = 0; i < stride; ++i) out[i] = Clip8(a[i], precision);
  }
}

}  // namespace stoker::vision
