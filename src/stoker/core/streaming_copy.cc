#include "stoker/core/streaming_copy.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace stoker {

void StreamingCopy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__SSE2__)
  if (n < kStreamingCopyMin) {
    std::memcpy(dst, src, n);
    return;
  }
  // Streaming stores need a 16-byte-aligned destination: copy up to the boundary first.
  const size_t head = (0 - reinterpret_cast<uintptr_t>(dst)) & 15;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
  }
  _mm_sfence();  // streaming stores are weakly ordered: order them before what follows
  std::memcpy(dst, src, n);
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace stoker
