// StreamingCopy: memcpy for bytes that the copying thread will not read again.
//
// An ordinary copy into memory that is not in cache first reads every destination line
// (to own it), then writes it: twice the memory traffic of the bytes. Body buffers are
// such memory. The IO thread fills them from a small, hot receive buffer, and a worker
// reads them much later, after hundreds of other bodies have passed through the cache.
// Streaming (non-temporal) stores write whole lines without reading them first. At
// 256 requests in flight they cut the cost of the copy by more than half (see
// docs/BENCHMARKS.md, object storage IO).
//
// Copies under kStreamingCopyMin bytes are an ordinary memcpy: the bytes may well be
// read again while still in cache, and the fence would cost more than it saves. The
// copy ends with a store fence, so a later release (a mutex unlock) publishes the
// bytes like any other stores. Without SSE2 (not x86) it is a memcpy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoker {

inline constexpr size_t kStreamingCopyMin = size_t{4} << 10;

// Copies `n` bytes from `src` to `dst` (which must not overlap); any alignment.
void StreamingCopy(uint8_t* dst, const uint8_t* src, size_t n);

}  // namespace stoker
