// The resize passes used in production: explicit SIMD with runtime dispatch (Highway
// compiles this file once per x86 target and picks the best the CPU has at run time).
// Same integer arithmetic as the scalar reference in resize.cc (tests compare them byte
// for byte on random inputs): products are exact in int32 and sums do not depend on
// their order, so lanes may add taps in any order.
//
// The vertical pass is SIMD over the bytes of a row (each output row is a weighted sum
// of input rows). The horizontal pass works on groups of AxisTaps::kTapGroup output
// pixels: a group whose outputs read consecutive inputs (the common case at scales
// near 1) is resized in the byte domain, like a vertical pass over the interleaved
// bytes; any other group is SIMD across output pixels, with a gather per tap and the
// three channels in separate int32 vectors. With torchvision's int16 weights the
// vertical and byte-domain passes multiply two taps per _mm256_madd_epi16.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stoker/vision/resize_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <algorithm>
#include <bit>

#include "stoker/vision/resize.h"

HWY_BEFORE_NAMESPACE();
namespace stoker::vision {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void VerticalPassSimd(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                      int y_begin, int y_end, uint8_t* dst) {
  const hn::ScalableTag<int32_t> di;
  const hn::Rebind<uint8_t, decltype(di)> du8;  // as many uint8 lanes as int32 lanes
  const size_t lanes = hn::Lanes(di);
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const size_t stride = static_cast<size_t>(width) * channels;
  const auto vbias = hn::Set(di, bias);
  for (int y = y_begin; y < y_end; ++y) {
    const int32_t* k = &taps.weights[static_cast<size_t>(y) * taps.max_taps];
    const uint8_t* in = src + stride * taps.start[y];
    const int n = taps.count[y];
    uint8_t* out = dst + stride * (y - y_begin);
    size_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    if (taps.int16_weights) {
      // Two input rows per _mm256_madd_epi16: their bytes interleaved, widened with
      // zeros to (row j, row j + 1) int16 pairs, times the pair (weight j, weight
      // j + 1). The in-lane unpacks put bytes 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27 and
      // 12-15 | 28-31 in the four accumulators, and the in-lane packs at the end put
      // them back in order. Integer sums, so the same bytes as one tap at a time.
      const int32_t* pw = taps.pair_weights.data() + static_cast<size_t>(y) * taps.pair_stride;
      const int pairs = (n + 1) / 2;
      const __m256i zero = _mm256_setzero_si256();
      const __m128i shift = _mm_cvtsi32_si128(precision);
      for (; i + 32 <= stride; i += 32) {
        __m256i a0 = _mm256_set1_epi32(bias), a1 = a0, a2 = a0, a3 = a0;
        for (int pair = 0; pair < pairs; ++pair) {
          const uint8_t* row = in + stride * (2 * pair) + i;
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
          const __m256i b = 2 * pair + 1 < n
                                ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + stride))
                                : zero;
          const __m256i w = _mm256_set1_epi32(pw[pair]);
          const __m256i lo = _mm256_unpacklo_epi8(a, b), hi = _mm256_unpackhi_epi8(a, b);
          a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), w));
          a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), w));
          a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), w));
          a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), w));
        }
        // Arithmetic shift = floor division; signed then unsigned saturating packs clip
        // to [0, 255] (clip8).
        const __m256i bytes = _mm256_packus_epi16(
            _mm256_packs_epi32(_mm256_sra_epi32(a0, shift), _mm256_sra_epi32(a1, shift)),
            _mm256_packs_epi32(_mm256_sra_epi32(a2, shift), _mm256_sra_epi32(a3, shift)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
      }
    }
#endif
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

// One output pixel of the horizontal RGB pass, scalar (row tails and groups that
// would read past the end of the last row).
HWY_INLINE void HorizontalPixelScalar(const uint8_t* in, const AxisTaps& taps, int x,
                                      int32_t bias, uint8_t* out) {
  const int32_t* k = taps.weights.data() + static_cast<size_t>(x) * taps.max_taps;
  const uint8_t* p = in + static_cast<size_t>(taps.start[x]) * 3;
  const int n = taps.count[x];
  int32_t r = bias, g = bias, b = bias;
  for (int j = 0; j < n; ++j, p += 3) {
    r += p[0] * k[j];
    g += p[1] * k[j];
    b += p[2] * k[j];
  }
  const int precision = taps.precision;
  const auto clip = [precision](int32_t acc) {
    const int32_t v = acc >> precision;
    return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
  };
  out[x * 3 + 0] = clip(r);
  out[x * 3 + 1] = clip(g);
  out[x * 3 + 2] = clip(b);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// One group of the int16 byte-domain horizontal pass (AxisTaps::group_byte_pairs):
// `load(pair, &x, &y, &x4, &y4)` gives, for taps j = 2 * pair and j + 1, the input
// bytes of output bytes 0-31 (x: tap j, y: tap j + 1; 128-bit lanes = bytes 0-15 and
// 16-31) and 32-47 (x4, y4). Interleaving a tap pair's bytes and widening with zeros
// gives (tap j, tap j + 1) int16 pairs for _mm256_madd_epi16; the in-lane unpacks
// scramble the bytes in a fixed way (kBytePairOrder, which the weights follow), and
// the in-lane packs at the end undo it. Integer sums, so the same bytes as one tap at
// a time. Writes the group's 48 output bytes at `dst`.
template <class Load>
HWY_INLINE void BytePairGroup(int pairs, const int32_t* w, int precision, int32_t bias,
                              uint8_t* dst, const Load& load) {
  const __m256i zero = _mm256_setzero_si256();
  const __m128i zero4 = _mm_setzero_si128();
  __m256i a0 = _mm256_set1_epi32(bias), a1 = a0, a2 = a0, a3 = a0;
  __m128i c0 = _mm_set1_epi32(bias), c1 = c0, c2 = c0, c3 = c0;
  for (int pair = 0; pair < pairs; ++pair, w += AxisTaps::kGroupBytes) {
    __m256i x, y;
    __m128i x4, y4;
    load(pair, &x, &y, &x4, &y4);
    const __m256i lo = _mm256_unpacklo_epi8(x, y), hi = _mm256_unpackhi_epi8(x, y);
    auto weights = [w](int k) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    };
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), weights(0)));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), weights(8)));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), weights(16)));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), weights(24)));
    const __m128i lo4 = _mm_unpacklo_epi8(x4, y4), hi4 = _mm_unpackhi_epi8(x4, y4);
    auto weights4 = [w](int k) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
    };
    c0 = _mm_add_epi32(c0, _mm_madd_epi16(_mm_unpacklo_epi8(lo4, zero4), weights4(32)));
    c1 = _mm_add_epi32(c1, _mm_madd_epi16(_mm_unpackhi_epi8(lo4, zero4), weights4(36)));
    c2 = _mm_add_epi32(c2, _mm_madd_epi16(_mm_unpacklo_epi8(hi4, zero4), weights4(40)));
    c3 = _mm_add_epi32(c3, _mm_madd_epi16(_mm_unpackhi_epi8(hi4, zero4), weights4(44)));
  }
  // Arithmetic shift = floor division; signed then unsigned saturating packs clip to
  // [0, 255] (clip8).
  const __m128i shift = _mm_cvtsi32_si128(precision);
  const __m256i bytes = _mm256_packus_epi16(
      _mm256_packs_epi32(_mm256_sra_epi32(a0, shift), _mm256_sra_epi32(a1, shift)),
      _mm256_packs_epi32(_mm256_sra_epi32(a2, shift), _mm256_sra_epi32(a3, shift)));
  const __m128i bytes4 = _mm_packus_epi16(
      _mm_packs_epi32(_mm_sra_epi32(c0, shift), _mm_sra_epi32(c1, shift)),
      _mm_packs_epi32(_mm_sra_epi32(c2, shift), _mm_sra_epi32(c3, shift)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bytes);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 32), bytes4);
}
#endif

// Horizontal pass over RGB rows, one group of kTapGroup output pixels at a time.
// Contiguous groups (AxisTaps::group_contiguous) run in the byte domain (below). Other
// groups are SIMD across output pixels: lane i of a vector is output pixel x0 + i; per
// tap, one gather fetches the 4 bytes at each lane's input pixel (its R, G, B and one
// byte of the next pixel, masked off), and three int32 multiply-adds accumulate the
// channels (tables from PlanAxis: group_table). Reading past a group's last input
// pixel (the gather's fourth byte, or the zero-weight tap that pads an odd tap count)
// touches the next row, so in the last row of `src` a group reaching the last input
// pixel runs scalar. Returns false (nothing written) when the vector width does not
// divide the group.
bool HorizontalPassRgbSimd(const uint8_t* src, int rows, const AxisTaps& taps,
                           uint8_t* dst) {
  const hn::ScalableTag<int32_t> d;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  constexpr int kGroup = AxisTaps::kTapGroup;
  const int lanes = static_cast<int>(hn::Lanes(d));
  if (lanes > kGroup || kGroup % lanes != 0) return false;
  const int precision = taps.precision;
  const int32_t bias = int32_t{1} << (precision - 1);
  const auto vbias = hn::Set(d, bias);
  const auto byte_mask = hn::Set(d, 0xFF);
  const size_t in_stride = static_cast<size_t>(taps.in_size) * 3;
  const size_t out_stride = static_cast<size_t>(taps.out_size) * 3;
  const int groups = static_cast<int>(taps.group_taps.size());
  const int32_t* table = taps.group_table.data();
  for (int y = 0; y < rows; ++y) {
    const uint8_t* in = src + in_stride * y;
    const auto* in32 = reinterpret_cast<const int32_t*>(in);
    uint8_t* out = dst + out_stride * y;
    const bool last_row = y == rows - 1;
    for (int g = 0; g < groups; ++g) {
      const int x0 = g * kGroup;
      if (last_row && taps.group_last[g] >= taps.in_size - 1) {
        for (int x = x0; x < x0 + kGroup; ++x) HorizontalPixelScalar(in, taps, x, bias, out);
        continue;
      }
      const int n = taps.group_taps[g];
      const int32_t* t = table + taps.group_index[g];
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      if (taps.group_contiguous[g] && taps.group_byte_pairs_index[g] >= 0) {
        // Reads end at first + 6 * pairs + 45: one pixel past the group's last input
        // when the tap count is odd (a tap of weight 0), which the last-row check
        // above keeps inside `src`.
        const uint8_t* first = in + static_cast<size_t>(taps.start[x0]) * 3;
        BytePairGroup(
            (n + 1) / 2, taps.group_byte_pairs.data() + taps.group_byte_pairs_index[g],
            precision, bias, out + static_cast<size_t>(x0) * 3,
            [first](int pair, __m256i* x, __m256i* y, __m128i* x4, __m128i* y4) {
              const uint8_t* at = first + 6 * pair;
              *x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
              *y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 3));
              *x4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 32));
              *y4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 35));
            });
        continue;
      }
      if (taps.group_window_index[g] >= 0) {
        const AxisTaps::ByteWindow& win = taps.group_windows[taps.group_window_index[g]];
        // The windows read up to read_end, past the group's inputs: stay inside `src`.
        if (static_cast<size_t>(win.read_end) > in_stride * static_cast<size_t>(rows - y)) {
          for (int x = x0; x < x0 + kGroup; ++x) HorizontalPixelScalar(in, taps, x, bias, out);
          continue;
        }
        const uint8_t* first = in + static_cast<size_t>(taps.start[x0]) * 3;
        __m128i lo[3], hi[3];
        for (int q = 0; q < 3; ++q) {
          lo[q] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(win.lo[q].data()));
          hi[q] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(win.hi[q].data()));
        }
        // Tap j's 16 output bytes of chunk q, from its window at `tap` + base[q].
        auto chunk = [&](const uint8_t* tap, int q) {
          const uint8_t* at = tap + win.base[q];
          return _mm_or_si128(
              _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)), lo[q]),
              _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 16)),
                               hi[q]));
        };
        BytePairGroup(
            (n + 1) / 2, taps.group_byte_pairs.data() + taps.group_byte_pairs_index[g],
            precision, bias, out + static_cast<size_t>(x0) * 3,
            [&](int pair, __m256i* x, __m256i* y, __m128i* x4, __m128i* y4) {
              const uint8_t* a = first + 6 * pair;
              const uint8_t* b = a + 3;
              *x = _mm256_inserti128_si256(_mm256_castsi128_si256(chunk(a, 0)), chunk(a, 1), 1);
              *y = _mm256_inserti128_si256(_mm256_castsi128_si256(chunk(b, 0)), chunk(b, 1), 1);
              *x4 = chunk(a, 2);
              *y4 = chunk(b, 2);
            });
        continue;
      }
      if (taps.group_contiguous[g] && taps.group_byte_weights_index[g] >= 0) {
        // Pillow's 32-bit weights in the byte domain (AxisTaps::group_byte_weights): per
        // tap, the 48 output bytes' inputs are the 48 bytes at first + 3j, widened 8 at
        // a time to int32 and multiplied by each byte's weight. Integer sums, so the
        // same bytes as the reference.
        // Reads end at first + 3 * (n - 1) + 48: the group's last input byte.
        const uint8_t* first = in + static_cast<size_t>(taps.start[x0]) * 3;
        const int32_t* w = taps.group_byte_weights.data() + taps.group_byte_weights_index[g];
        __m256i acc[6];
        for (auto& a : acc) a = _mm256_set1_epi32(bias);
        for (int j = 0; j < n; ++j, w += AxisTaps::kGroupBytes) {
          const uint8_t* at = first + 3 * j;
          for (int k = 0; k < 6; ++k) {
            const __m256i v = _mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at + 8 * k)));
            acc[k] = _mm256_add_epi32(
                acc[k], _mm256_mullo_epi32(
                            v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 8 * k))));
          }
        }
        // Arithmetic shift = floor division; saturating packs clip to [0, 255] (clip8).
        // The packs work within 128-bit lanes; the permutes put the bytes back in order.
        const __m128i shift = _mm_cvtsi32_si128(precision);
        auto words = [&](int k) {  // 16 int16 of accumulators k, k + 1, in order
          return _mm256_permute4x64_epi64(
              _mm256_packs_epi32(_mm256_sra_epi32(acc[k], shift),
                                 _mm256_sra_epi32(acc[k + 1], shift)),
              0xD8);
        };
        const __m256i w01 = words(0), w23 = words(2), w45 = words(4);
        const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(w01, w23), 0xD8);
        const __m256i tail = _mm256_permute4x64_epi64(_mm256_packus_epi16(w45, w45), 0xD8);
        uint8_t* dst_group = out + static_cast<size_t>(x0) * 3;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst_group), bytes);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst_group + 32),
                         _mm256_castsi256_si128(tail));
        continue;
      }
#endif
      for (int sub = 0; sub < kGroup; sub += lanes) {
        auto r = vbias, gr = vbias, b = vbias;
        for (int j = 0; j < n; ++j) {
          const int32_t* tj = t + j * 2 * kGroup + sub;
          const auto offsets = hn::LoadU(d, tj);
          const auto w = hn::LoadU(d, tj + kGroup);
          const auto px = hn::GatherOffset(d, in32, offsets);
          r = hn::Add(r, hn::Mul(hn::And(px, byte_mask), w));
          gr = hn::Add(gr, hn::Mul(hn::And(hn::ShiftRight<8>(px), byte_mask), w));
          b = hn::Add(b, hn::Mul(hn::And(hn::ShiftRight<16>(px), byte_mask), w));
        }
        // Arithmetic shift = floor division; DemoteTo saturates to [0, 255] (clip8).
        hn::StoreInterleaved3(hn::DemoteTo(du8, hn::ShiftRightSame(r, precision)),
                              hn::DemoteTo(du8, hn::ShiftRightSame(gr, precision)),
                              hn::DemoteTo(du8, hn::ShiftRightSame(b, precision)), du8,
                              out + static_cast<size_t>(x0 + sub) * 3);
      }
    }
    for (int x = groups * kGroup; x < taps.out_size; ++x) {
      HorizontalPixelScalar(in, taps, x, bias, out);
    }
  }
  return true;
}

}  // namespace HWY_NAMESPACE
}  // namespace stoker::vision
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace stoker::vision {

HWY_EXPORT(VerticalPassSimd);
HWY_EXPORT(HorizontalPassRgbSimd);


void VerticalPass(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                  uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(VerticalPassSimd)(src, width, channels, taps, 0, taps.out_size, dst);
}

void VerticalPassRows(const uint8_t* src, int width, int channels, const AxisTaps& taps,
                      int y_begin, int y_end, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(VerticalPassSimd)(src, width, channels, taps, y_begin, y_end, dst);
}

void HorizontalPass(const uint8_t* src, int rows, int channels, const AxisTaps& taps,
                    uint8_t* dst) {
  // The gathers read each pixel's bytes as one little-endian word.
  if (channels == 3 && std::endian::native == std::endian::little &&
      taps.group_taps.size() == static_cast<size_t>(taps.out_size / AxisTaps::kTapGroup) &&
      HWY_DYNAMIC_DISPATCH(HorizontalPassRgbSimd)(src, rows, taps, dst)) {
    return;
  }
  HorizontalPassScalar(src, rows, channels, taps, dst);
}

}  // namespace stoker::vision
#endif  // HWY_ONCE
