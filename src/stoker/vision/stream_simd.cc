// Streaming stores with runtime dispatch (Highway compiles this file once per target).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stoker/vision/stream_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "stoker/vision/stream.h"

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
