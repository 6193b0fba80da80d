// Patchify and streaming stores with runtime dispatch (Highway compiles this file once
// per target and picks the best the CPU has at run time).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stoker/vision/patchify_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "stoker/vision/patchify.h"

HWY_BEFORE_NAMESPACE();
namespace stoker::vision {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

void StreamFloatsSimd(const float* src, size_t n, float* dst) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t align = lanes * sizeof(float);
  // Plain stores up to the first vector-aligned address (floats are 4-byte aligned, so
  // this takes fewer than `lanes` of them).
  size_t i = 0;
  while (i < n && reinterpret_cast<uintptr_t>(dst + i) % align != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + lanes <= n; i += lanes) hn::Stream(hn::LoadU(d, src + i), d, dst + i);
  if (i < n) std::memcpy(dst + i, src + i, (n - i) * sizeof(float));
}

// 8 pixels per step: LoadInterleaved3 splits 24 bytes into R, G, B; each channel is
// widened to 8 floats and normalised. A patch row of p >= 8 pixels takes steps at
// 0, 8, ... and a last one at p - 8 (overlapping, rewriting equal values), so nothing
// outside the patch is read. Needs 256-bit vectors (AVX2 and up). Whether to divide by
// the rescale divisor and the temporal count (kT, 0 = any) are template parameters, so
// the inner loop has no branch on them.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
template <bool kDivide, int kT>
void PatchRows(const uint8_t* band, size_t stride, int64_t wb, int m, int p, int t_any,
               const NormalizeFormula& formula, float* out, bool stream, float* row) {
  const hn::Full256<float> df;
  const hn::Full256<int32_t> di;
  const hn::Full64<uint8_t> du8;
  using V = hn::Vec<decltype(df)>;
  const int t = kT > 0 ? kT : t_any;
  const size_t block = static_cast<size_t>(p) * p;
  const size_t length = 3 * static_cast<size_t>(t) * block;
  const V divisor = hn::Set(df, formula.divisor);
  V mean[3], stdev[3];
  for (int c = 0; c < 3; ++c) {
    mean[c] = hn::Set(df, formula.mean[c]);
    stdev[c] = hn::Set(df, formula.std[c]);
  }
  for (int64_t bw = 0; bw < wb; ++bw) {
    for (int mh = 0; mh < m; ++mh) {
      for (int mw = 0; mw < m; ++mw) {
        const uint8_t* origin =
            band + stride * static_cast<size_t>(mh * p) + static_cast<size_t>((bw * m + mw) * p) * 3;
        float* dst = stream ? row : out;
        for (int py = 0; py < p; ++py) {
          const uint8_t* src = origin + stride * py;
          float* line = dst + static_cast<size_t>(py) * p;
          for (int px = 0;; px += 8) {
            if (px > p - 8) px = p - 8;
            hn::Vec<decltype(du8)> r8, g8, b8;
            hn::LoadInterleaved3(du8, src + 3 * px, r8, g8, b8);
            // One channel: normalise and store its t copies (separate calls, not a
            // loop over an array of vectors, so everything stays in registers).
            const auto channel = [&](hn::Vec<decltype(du8)> v8, int c) HWY_ATTR {
              V x = hn::ConvertTo(df, hn::PromoteTo(di, v8));
              if constexpr (kDivide) x = hn::Div(x, divisor);
              const V y = hn::Div(hn::Sub(x, mean[c]), stdev[c]);
              float* d = line + static_cast<size_t>(c * t) * block + px;
              for (int tp = 0; tp < t; ++tp) hn::StoreU(y, df, d + tp * block);
            };
            channel(r8, 0);
            channel(g8, 1);
            channel(b8, 2);
            if (px == p - 8) break;
          }
        }
        if (stream) StreamFloatsSimd(row, length, out);
        out += length;
      }
    }
  }
}

template <bool kDivide>
void PatchRowsT(const uint8_t* band, size_t stride, int64_t wb, int m, int p, int t,
                const NormalizeFormula& formula, float* out, bool stream, float* row) {
  if (t == 2) {
    PatchRows<kDivide, 2>(band, stride, wb, m, p, t, formula, out, stream, row);
  } else {
    PatchRows<kDivide, 0>(band, stride, wb, m, p, t, formula, out, stream, row);
  }
}
#endif

bool WritePatchRowsSimdImpl(const uint8_t* band, size_t stride, int64_t wb, int m, int p,
                            int t, const NormalizeFormula& formula, float* out,
                            bool stream, float* row) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  if (p < 8) return false;
  if (formula.divisor != 1.0f) {
    PatchRowsT<true>(band, stride, wb, m, p, t, formula, out, stream, row);
  } else {
    PatchRowsT<false>(band, stride, wb, m, p, t, formula, out, stream, row);
  }
  return true;
#else
  (void)band, (void)stride, (void)wb, (void)m, (void)p, (void)t, (void)formula, (void)out,
      (void)stream, (void)row;
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace stoker::vision
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#if HWY_ARCH_X86
#include <immintrin.h>
#endif
#include <atomic>

namespace stoker::vision {

HWY_EXPORT(StreamFloatsSimd);
HWY_EXPORT(WritePatchRowsSimdImpl);

bool WritePatchRowsSimd(const uint8_t* band, size_t stride, int64_t wb, int m, int p,
                        int t, const NormalizeFormula& formula, float* out, bool stream,
                        float* row) {
  return HWY_DYNAMIC_DISPATCH(WritePatchRowsSimdImpl)(band, stride, wb, m, p, t, formula,
                                                      out, stream, row);
}

void StreamFloats(const float* src, size_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(StreamFloatsSimd)(src, n, dst);
}

void StreamFence() {
#if HWY_ARCH_X86
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace stoker::vision
#endif  // HWY_ONCE
