#include "stoker/vision/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace stoker::vision {

namespace {

// Keys' cubic convolution kernel with a = -0.5, support 2. The two libraries evaluate
// the outer piece in different operation orders, which can change the last bit of a
// weight, so each gets its own copy (Pillow: Resample.c bicubic_filter; ATen:
// UpSampleKernel.cpp aa_filter via cubic_convolution2).
constexpr double kCubicA = -0.5;
constexpr double kCubicSupport = 2.0;

double PillowCubic(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((kCubicA + 2.0) * x - (kCubicA + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * kCubicA;
  return 0.0;
}

double TorchCubic(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((kCubicA + 2) * x - (kCubicA + 3)) * x * x + 1;
  if (x < 2.0) return ((kCubicA * x - 5 * kCubicA) * x + 8 * kCubicA) * x - 4 * kCubicA;
  return 0.0;
}

// Pillow: PRECISION_BITS = 32 - 8 - 2 (Resample.c).
constexpr int kPillowPrecision = 22;
// ATen picks the largest precision whose biggest weight still fits int16 (< 2^15),
// searching up to 22 bits.
constexpr int kTorchMaxPrecision = 22;
constexpr double kInt16Limit = 32768.0;

// Rounds half away from zero, as both libraries' (int)(w +/- 0.5) casts do.
int32_t RoundAway(double v) {
  return v < 0 ? static_cast<int32_t>(-0.5 + v) : static_cast<int32_t>(0.5 + v);
}

inline uint8_t Clip8(int32_t acc, int precision) {
  const int32_t v = acc >> precision;  // arithmetic shift: floor division
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

void PlanAxis(ResizeBackend backend, int in_size, int out_size, AxisTaps* taps) {
  const bool pillow = backend == ResizeBackend::kPillow;
  // Pillow's box edge is a float32; in_size is exact in float32 for any real image.
  const double scale = pillow ? static_cast<double>(static_cast<float>(in_size)) / out_size
                              : static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filter_scale = scale < 1.0 ? 1.0 : scale;
  const double support = kCubicSupport * filter_scale;
  const int max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  const double inv_scale = 1.0 / filter_scale;

  taps->in_size = in_size;
  taps->out_size = out_size;
  taps->max_taps = max_taps;
  taps->start.resize(out_size);
  taps->count.resize(out_size);
  // Float weights first (both libraries normalise in double, then convert).
  thread_local std::vector<double> weights;
  weights.assign(static_cast<size_t>(out_size) * max_taps, 0.0);
  double max_weight = 0.0;
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    int xmin = static_cast<int>(center - support + 0.5);  // truncation toward zero
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    int n = std::clamp(xmax - xmin, 0, max_taps);
    double* w = &weights[static_cast<size_t>(i) * max_taps];
    double total = 0.0;
    for (int j = 0; j < n; ++j) {
      // (int sum) - center + 0.5, then scaled: the libraries' operation order.
      const double x = ((j + xmin) - center + 0.5) * inv_scale;
      w[j] = pillow ? PillowCubic(x) : TorchCubic(x);
      total += w[j];
    }
    if (total != 0.0) {
      for (int j = 0; j < n; ++j) {
        w[j] /= total;  // a division, not a multiplication by 1 / total
        max_weight = std::max(max_weight, w[j]);
      }
    }
    taps->start[i] = xmin;
    taps->count[i] = n;
  }

  int precision = kPillowPrecision;
  if (!pillow) {
    precision = 0;
    while (precision < kTorchMaxPrecision) {
      const double scaled = max_weight * static_cast<double>(int64_t{1} << (precision + 1));
      if (static_cast<int64_t>(0.5 + scaled) >= static_cast<int64_t>(kInt16Limit)) break;
      ++precision;
    }
  }
  taps->precision = precision;
  const double one = static_cast<double>(int64_t{1} << precision);
  taps->weights.resize(weights.size());
  for (size_t k = 0; k < weights.size(); ++k) {
    // Pillow multiplies by 2^22 then rounds; ATen scales by 2^p then rounds, and
    // stores int16. The padding weights (0.0) convert to 0 either way.
    int32_t v = RoundAway(weights[k] * one);
    if (!pillow) v = static_cast<int16_t>(v);
    taps->weights[k] = v;
  }

  taps->int16_weights = !pillow;
  taps->pair_stride = pillow ? 0 : (max_taps + 1) / 2;
  taps->pair_weights.assign(static_cast<size_t>(out_size) * taps->pair_stride, 0);
  for (int i = 0; i < out_size && !pillow; ++i) {
    for (int j = 0; j < taps->count[i]; ++j) {
      const auto w = static_cast<uint16_t>(
          static_cast<int16_t>(taps->weights[static_cast<size_t>(i) * max_taps + j]));
      taps->pair_weights[static_cast<size_t>(i) * taps->pair_stride + j / 2] |=
          static_cast<int32_t>(static_cast<uint32_t>(w) << (16 * (j % 2)));
    }
  }
  constexpr int kGroup = AxisTaps::kTapGroup;
  const int groups = out_size / kGroup;  // a partial last group runs the scalar loop
  taps->group_taps.resize(groups);
  taps->group_index.resize(groups);
  taps->group_last.resize(groups);
  taps->group_contiguous.resize(groups);
  taps->group_table.clear();
  taps->group_byte_pairs.clear();
  taps->group_byte_pairs_index.assign(groups, -1);
  taps->group_byte_weights.clear();
  taps->group_byte_weights_index.assign(groups, -1);
  taps->group_windows.clear();
  taps->group_window_index.assign(groups, -1);
  for (int g = 0; g < groups; ++g) {
    int n = 0, last = 0;
    bool contiguous = true;
    for (int i = g * kGroup; i < (g + 1) * kGroup; ++i) {
      n = std::max(n, taps->count[i]);
      contiguous = contiguous && taps->start[i] == taps->start[g * kGroup] + (i - g * kGroup);
    }
    taps->group_contiguous[g] =
        contiguous && taps->start[(g + 1) * kGroup - 1] + n - 1 <= in_size - 1;
    taps->group_taps[g] = n;
    taps->group_index[g] = static_cast<int32_t>(taps->group_table.size());
    for (int j = 0; j < n; ++j) {
      for (int i = g * kGroup; i < (g + 1) * kGroup; ++i) {
        const int index = std::min(taps->start[i] + j, in_size - 1);
        last = std::max(last, index);
        taps->group_table.push_back(index * 3);
      }
      for (int i = g * kGroup; i < (g + 1) * kGroup; ++i) {
        taps->group_table.push_back(
            j < taps->count[i] ? taps->weights[static_cast<size_t>(i) * max_taps + j] : 0);
      }
    }
    taps->group_last[g] = last;
    if (!taps->int16_weights && taps->group_contiguous[g]) {
      taps->group_byte_weights_index[g] = static_cast<int32_t>(taps->group_byte_weights.size());
      for (int j = 0; j < n; ++j) {
        for (int b = 0; b < AxisTaps::kGroupBytes; ++b) {
          const int i = g * kGroup + b / 3;
          taps->group_byte_weights.push_back(
              j < taps->count[i] ? taps->weights[static_cast<size_t>(i) * max_taps + j] : 0);
        }
      }
    }
    bool windowed = false;
    if (taps->int16_weights && !taps->group_contiguous[g]) {
      AxisTaps::ByteWindow window;
      const int s0 = taps->start[g * kGroup];
      windowed = true;
      for (int q = 0; q < 3 && windowed; ++q) {
        int idx[16];
        int low = INT32_MAX, high = 0;
        for (int k = 0; k < 16; ++k) {
          const int b = 16 * q + k;
          idx[k] = 3 * (taps->start[g * kGroup + b / 3] - s0) + b % 3;
          low = std::min(low, idx[k]);
          high = std::max(high, idx[k]);
        }
        if (high - low >= 32) {
          windowed = false;
          break;
        }
        window.base[q] = low;
        for (int k = 0; k < 16; ++k) {
          const int at = idx[k] - low;
          window.lo[q][k] = at < 16 ? static_cast<uint8_t>(at) : 0x80;
          window.hi[q][k] = at >= 16 ? static_cast<uint8_t>(at - 16) : 0x80;
        }
      }
      if (windowed) {
        const int pairs = (n + 1) / 2;
        window.read_end = 3 * s0 + *std::max_element(window.base.begin(), window.base.end()) +
                          3 * (2 * pairs - 1) + 32;
        taps->group_window_index[g] = static_cast<int32_t>(taps->group_windows.size());
        taps->group_windows.push_back(window);
      }
    }
    if (taps->int16_weights && (taps->group_contiguous[g] || windowed)) {
      // Each output byte's pair word is its pixel's (pair_weights), in byte order.
      taps->group_byte_pairs_index[g] = static_cast<int32_t>(taps->group_byte_pairs.size());
      for (int pair = 0; pair < (n + 1) / 2; ++pair) {
        for (int8_t b : AxisTaps::kBytePairOrder) {
          const int i = g * kGroup + b / 3;
          taps->group_byte_pairs.push_back(
              taps->pair_weights[static_cast<size_t>(i) * taps->pair_stride + pair]);
        }
      }
    }
  }
}

void HorizontalPassScalar(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                          uint8_t* dst) {
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t in_stride = static_cast<size_t>(taps.in_size) * channels;
  const size_t out_stride = static_cast<size_t>(taps.out_size) * channels;
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + in_stride * y;
    uint8_t* out = dst + out_stride * y;
    for (int x = 0; x < taps.out_size; ++x) {
      const int32_t* k = &taps.weights[static_cast<size_t>(x) * taps.max_taps];
      const uint8_t* p = in + static_cast<size_t>(taps.start[x]) * channels;
      const int n = taps.count[x];
      for (int c = 0; c < channels; ++c) {
        int32_t acc = bias;
        for (int j = 0; j < n; ++j) acc += static_cast<int32_t>(p[j * channels + c]) * k[j];
        out[x * channels + c] = Clip8(acc, precision);
      }
    }
  }
}

void VerticalPassScalar(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                        uint8_t* dst) {
  VerticalPassRowsScalar(src, width, channels, taps, 0, taps.out_size, dst);
}

void VerticalPassRowsScalar(const uint8_t* src, int width, int channels,
                            const AxisTaps& taps, int y_begin, int y_end, uint8_t* dst) {
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t stride = static_cast<size_t>(width) * channels;
  for (int y = y_begin; y < y_end; ++y) {
    const int32_t* k = &taps.weights[static_cast<size_t>(y) * taps.max_taps];
    const uint8_t* in = src + stride * taps.start[y];
    const int n = taps.count[y];
    uint8_t* out = dst + stride * (y - y_begin);
    for (size_t i = 0; i < stride; ++i) {
      int32_t acc = bias;
      for (int j = 0; j < n; ++j) acc += static_cast<int32_t>(in[stride * j + i]) * k[j];
      out[i] = Clip8(acc, precision);
    }
  }
}

bool PillowVerticalFirst(PillowPassOrder order, int width, int height, int out_width,
                         int out_height) {
  if (out_height >= height) return false;
  switch (order) {
    case PillowPassOrder::kHorizontalFirst: return false;
    case PillowPassOrder::kTallVerticalFirst: return int64_t{height} > int64_t{100} * width;
    case PillowPassOrder::kReductionBased:
      return 2 * (int64_t{width} - out_width) < int64_t{height} - out_height;
  }
  return false;
}

void ResizeRgb(const uint8_t* src, int width, int height, uint8_t* dst, int out_width,
               int out_height, const ResizeOptions& options, ResizeScratch& scratch) {
  constexpr int kChannels = 3;
  const bool need_h = out_width != width;
  const bool need_v = out_height != height;
  auto horizontal = options.force_scalar ? HorizontalPassScalar : HorizontalPass;
  auto vertical = options.force_scalar ? VerticalPassScalar : VerticalPass;
  if (!need_h && !need_v) {
    std::memcpy(dst, src, static_cast<size_t>(width) * height * kChannels);
    return;
  }
  if (need_h) PlanAxis(options.backend, width, out_width, &scratch.horizontal);
  if (need_v) PlanAxis(options.backend, height, out_height, &scratch.vertical);
  if (!need_v) {
    horizontal(src, height, kChannels, scratch.horizontal, dst);
    return;
  }
  if (!need_h) {
    vertical(src, width, kChannels, scratch.vertical, dst);
    return;
  }
  const bool vertical_first =
      options.backend == ResizeBackend::kPillow &&
      PillowVerticalFirst(options.pillow_order, width, height, out_width, out_height);
  if (vertical_first) {
    scratch.intermediate.resize(static_cast<size_t>(width) * out_height * kChannels);
    vertical(src, width, kChannels, scratch.vertical, scratch.intermediate.data());
    horizontal(scratch.intermediate.data(), out_height, kChannels, scratch.horizontal, dst);
    return;
  }
  // Both libraries run the whole horizontal pass into a uint8 image (Pillow skips rows
  // no vertical tap reads; their values would be the same).
  scratch.intermediate.resize(static_cast<size_t>(out_width) * height * kChannels);
  horizontal(src, height, kChannels, scratch.horizontal, scratch.intermediate.data());
  vertical(scratch.intermediate.data(), out_width, kChannels, scratch.vertical, dst);
}

void RowResizer::Start(const uint8_t* src, int width, int height, int out_width,
                       int out_height, const ResizeOptions& options, ResizeScratch& scratch) {
  src_ = src;
  width_ = width;
  height_ = height;
  out_width_ = out_width;
  out_height_ = out_height;
  need_h_ = out_width != width;
  need_v_ = out_height != height;
  force_scalar_ = options.force_scalar;
  vertical_first_ = need_h_ && need_v_ && options.backend == ResizeBackend::kPillow &&
                    PillowVerticalFirst(options.pillow_order, width, height, out_width,
                                        out_height);
  h_rows_done_ = 0;
  scratch_ = &scratch;
  if (need_h_) PlanAxis(options.backend, width, out_width, &scratch.horizontal);
  if (need_v_) PlanAxis(options.backend, height, out_height, &scratch.vertical);
  if (need_h_ && need_v_ && !vertical_first_) {
    scratch.intermediate.resize(static_cast<size_t>(out_width) * height * 3);
  }
}

const uint8_t* RowResizer::Rows(int y_begin, int y_end) {
  constexpr int kChannels = 3;
  const size_t in_stride = static_cast<size_t>(width_) * kChannels;
  const size_t out_stride = static_cast<size_t>(out_width_) * kChannels;
  const int rows = y_end - y_begin;
  if (!need_h_ && !need_v_) return src_ + out_stride * y_begin;
  auto horizontal = force_scalar_ ? HorizontalPassScalar : HorizontalPass;
  auto vertical = force_scalar_ ? VerticalPassRowsScalar : VerticalPassRows;
  ResizeScratch& s = *scratch_;
  if (s.band.size() < out_stride * rows) s.band.resize(out_stride * rows);
  uint8_t* band = s.band.data();
  if (!need_v_) {
    horizontal(src_ + in_stride * y_begin, rows, kChannels, s.horizontal, band);
  } else if (!need_h_) {
    vertical(src_, width_, kChannels, s.vertical, y_begin, y_end, band);
  } else if (vertical_first_) {
    if (s.band_source.size() < in_stride * rows) s.band_source.resize(in_stride * rows);
    vertical(src_, width_, kChannels, s.vertical, y_begin, y_end, s.band_source.data());
    horizontal(s.band_source.data(), rows, kChannels, s.horizontal, band);
  } else {
    // Resize horizontally every input row up to the last one these output rows read.
    int needed = h_rows_done_;
    for (int y = y_begin; y < y_end; ++y) {
      needed = std::max(needed, s.vertical.start[y] + s.vertical.count[y]);
    }
    if (needed > h_rows_done_) {
      horizontal(src_ + in_stride * h_rows_done_, needed - h_rows_done_, kChannels,
                 s.horizontal, s.intermediate.data() + out_stride * h_rows_done_);
      h_rows_done_ = needed;
    }
    vertical(s.intermediate.data(), out_width_, kChannels, s.vertical, y_begin, y_end, band);
  }
  return band;
}

}  // namespace stoker::vision
