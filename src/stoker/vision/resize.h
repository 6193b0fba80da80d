// Bicubic resize of RGB uint8 images, bit-exact with the two implementations Qwen-VL
// training stacks use:
//   * kPillow: Pillow's Image.resize(BICUBIC) for 8-bit images (Resample.c): weights in
//     22-bit fixed point, horizontal pass first, uint8 intermediate.
//   * kTorchvision: torchvision's resize(BICUBIC, antialias=True) on a CPU uint8 tensor
//     (ATen's antialiased separable kernel): int16 weights whose precision is chosen per
//     axis from the largest weight, horizontal pass first, uint8 intermediate.
// Both are separable Keys (a = -0.5) filters stretched by the scale when shrinking
// (antialiasing) and skip a pass whose dimension does not change.
//
// Two phases: PlanAxis computes the taps of one axis into caller-owned storage (reused
// across calls, so steady state allocates nothing); ResizeRgb runs the passes. Stateless
// apart from the scratch the caller passes; thread-safe with one scratch per thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace stoker::vision {

enum class ResizeBackend : uint8_t { kTorchvision, kPillow };

// Fixed-point taps of one axis: output sample i reads inputs [start[i], start[i] +
// count[i]) with weights[i * max_taps + j]; value = clip8((bias + sum) >> precision)
// with bias = 1 << (precision - 1).
struct AxisTaps {
  int in_size = 0;
  int out_size = 0;
  int max_taps = 0;
  int precision = 0;
  bool int16_weights = false;  // every weight fits int16 (the torchvision backend)
  std::vector<int32_t> start;
  std::vector<int32_t> count;
  std::vector<int32_t> weights;
  // With int16 weights, the same weights as int16 pairs for a multiply-add of two taps:
  // sample i's pair k (taps 2k, 2k + 1; a missing tap has weight 0) is the int32
  // pair_weights[i * pair_stride + k], tap 2k in the low half.
  int pair_stride = 0;
  std::vector<int32_t> pair_weights;
  // The same taps regrouped for the SIMD horizontal pass: output samples in groups of
  // kTapGroup; group g has group_taps[g] taps (the most any of its samples has) and
  // its table at group_table[group_index[g]]: for each tap j, kTapGroup byte offsets
  // (3 * input index, clamped to the last sample) then kTapGroup weights (0 past a
  // sample's own count). group_last[g]: the largest input index the group reads.
  // group_contiguous[g]: sample i of the group starts at input start[g * kTapGroup] + i
  // and no index is clamped, so tap j of the whole group reads kTapGroup consecutive
  // input samples (common at scales near 1).
  static constexpr int kTapGroup = 16;
  std::vector<int32_t> group_taps;
  std::vector<uint8_t> group_contiguous;
  std::vector<int32_t> group_index;
  std::vector<int32_t> group_last;
  std::vector<int32_t> group_table;
  // When every weight fits int16 (the torchvision backend), contiguous groups are
  // resized in the byte domain: output byte b of the group (pixel b / 3, channel b % 3)
  // is sum_j in[first + 3j + b] * w_j(b / 3), with first the group's first input byte,
  // so tap j of all 48 output bytes is one load at first + 3j, with no channel split.
  // Taps go in pairs (j, j + 1), j even, for one multiply-add of two taps: per pair, 48
  // int32, each the int16 pair (w_j, w_j+1) of one output byte (a missing tap j + 1 has
  // weight 0), in the order the SIMD pass consumes them (kBytePairOrder). At
  // group_byte_pairs[group_byte_pairs_index[g]], or -1.
  static constexpr int kGroupBytes = 3 * kTapGroup;
  static constexpr std::array<int8_t, kGroupBytes> kBytePairOrder = {
      0,  1,  2,  3,  16, 17, 18, 19, 4,  5,  6,  7,  20, 21, 22, 23,
      8,  9,  10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31,
      32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47};
  std::vector<int32_t> group_byte_pairs;
  std::vector<int32_t> group_byte_pairs_index;
  // Int16 groups that are not contiguous (a scale away from 1, or an upscale's repeated
  // start) but whose inputs are close: output byte b of tap j is input byte
  // first + 3j + idx[b], idx[b] = 3 * (start[i] - start[group's first]) + b % 3. Each
  // 16-byte chunk q of the group's 48 output bytes gathers its bytes from a 32-byte
  // window at first + 3j + base[q] with two pshufb (lo: window bytes 0-15, hi: 16-31;
  // 0x80 selects nothing), which needs the chunk's idx to span under 32 bytes (scales
  // down to about 1/2). read_end: one past the last byte the group reads, counted from
  // the row's start. Their weights are in group_byte_pairs as for contiguous groups.
  struct ByteWindow {
    std::array<int32_t, 3> base{};
    int32_t read_end = 0;
    std::array<std::array<uint8_t, 16>, 3> lo{};
    std::array<std::array<uint8_t, 16>, 3> hi{};
  };
  std::vector<ByteWindow> group_windows;
  std::vector<int32_t> group_window_index;  // per group, or -1
  // The same byte-domain layout for Pillow's 32-bit weights, one tap at a time: per tap
  // j, 48 int32, output byte b's w_j(b / 3) (0 past the sample's own count), in byte
  // order. At group_byte_weights[group_byte_weights_index[g]], or -1.
  std::vector<int32_t> group_byte_weights;
  std::vector<int32_t> group_byte_weights_index;
};

// Computes the taps for resizing `in_size` samples to `out_size` (both >= 1).
void PlanAxis(ResizeBackend backend, int in_size, int out_size, AxisTaps* taps);

// One pass over an interleaved uint8 image with `channels` channels per pixel.
// Horizontal: `rows` rows of taps.in_size pixels -> rows of taps.out_size pixels.
// Vertical: taps.in_size rows of `width` pixels -> taps.out_size rows.
// The scalar versions are the reference; the dispatching versions use the widest SIMD
// the CPU has and produce identical bytes (tested).
void HorizontalPassScalar(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                          uint8_t* dst);
void VerticalPassScalar(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                        uint8_t* dst);
void HorizontalPass(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                    uint8_t* dst);
void VerticalPass(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                  uint8_t* dst);
// The vertical pass for output rows [y_begin, y_end) only, written from `dst` on
// (row y_begin lands in dst's first row). `src` is the whole input image.
void VerticalPassRowsScalar(const uint8_t* src, int width, int channels,
                            const AxisTaps& taps, int y_begin, int y_end, uint8_t* dst);
void VerticalPassRows(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                      int y_begin, int y_end, uint8_t* dst);

// Which of Pillow's two passes runs first when both are needed. The intermediate image
// is rounded to uint8, so the order is part of the result. Ignored by kTorchvision
// (always horizontal first).
enum class PillowPassOrder : uint8_t {
  // Pillow < 12.2: always horizontal first.
  kHorizontalFirst,
  // Pillow 12.2 - 12.x: vertical first when H > 100 * W and the height shrinks
  // (Image.resize runs two separate resamples).
  kTallVerticalFirst,
  // Pillow 13: vertical first when the height shrinks by more than twice as many rows
  // as the width loses columns: H' < H and 2 * (W - W') < H - H'. (Measured against
  // Pillow 13.0.0 on ~800 random size pairs, every one decided by this rule.)
  kReductionBased,
};

// True when Pillow (in the given version family) runs the vertical pass first.
bool PillowVerticalFirst(PillowPassOrder order, int width, int height, int out_width,
                         int out_height);

struct ResizeOptions {
  ResizeBackend backend = ResizeBackend::kTorchvision;
  PillowPassOrder pillow_order = PillowPassOrder::kReductionBased;
  // Use the scalar reference passes instead of the dispatching ones.
  bool force_scalar = false;
};

// Reusable memory for ResizeRgb and RowResizer; grows to the largest image seen, never
// shrinks.
struct ResizeScratch {
  AxisTaps horizontal;
  AxisTaps vertical;
  std::vector<uint8_t> intermediate;
  std::vector<uint8_t> band;         // RowResizer: the rows handed out
  std::vector<uint8_t> band_source;  // RowResizer, vertical first: rows before the
                                     // horizontal pass
};

// Resizes an RGB image (height x width x 3, rows packed) into `dst` (out_height x
// out_width x 3). Copies when the size is unchanged. Requires all sizes >= 1.
void ResizeRgb(const uint8_t* src, int width, int height, uint8_t* dst, int out_width,
               int out_height, const ResizeOptions& options, ResizeScratch& scratch);

// The same resize (same bytes as ResizeRgb) handed out a band of output rows at a time,
// so that a consumer reads each band while it is still in cache instead of streaming a
// whole resized image through memory. With horizontal-first order the horizontal pass
// runs lazily, only up to the last input row the current band's vertical taps read.
// An unchanged size hands out the source rows themselves (no copy).
class RowResizer {
 public:
  // `src` must outlive the resizer's use; `scratch` is borrowed until the next Start.
  void Start(const uint8_t* src, int width, int height, int out_width, int out_height,
             const ResizeOptions& options, ResizeScratch& scratch);
  // Output rows [y_begin, y_end), packed (out_width * 3 bytes per row). Calls must ask
  // for increasing, non-overlapping ranges; the pointer is valid until the next call.
  const uint8_t* Rows(int y_begin, int y_end);

 private:
  const uint8_t* src_ = nullptr;
  int width_ = 0, height_ = 0, out_width_ = 0, out_height_ = 0;
  bool need_h_ = false, need_v_ = false, vertical_first_ = false, force_scalar_ = false;
  int h_rows_done_ = 0;  // horizontal-first: input rows already resized horizontally
  ResizeScratch* scratch_ = nullptr;
};

}  // namespace stoker::vision
