#include "stoker/core/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace stoker {
namespace {

// Every destination and source alignment, sizes around the streaming threshold and the
// 64-byte loop's edges: the copied bytes match, and no byte outside them is touched.
TEST(StreamingCopyTest, CopiesExactlyTheBytesAtAnyAlignment) {
  const size_t sizes[] = {0,
                          1,
                          15,
                          63,
                          kStreamingCopyMin - 1,
                          kStreamingCopyMin,
                          kStreamingCopyMin + 1,
                          kStreamingCopyMin + 15,
                          kStreamingCopyMin + 63,
                          kStreamingCopyMin + 64,
                          100003,
                          262144};
  std::vector<uint8_t> source(262144 + 128);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> target(262144 + 256);
  const std::vector<uint8_t> untouched(target.size(), 0xA5);
  for (size_t n : sizes) {
    for (size_t dst_off = 0; dst_off < 64; dst_off += 3) {
      for (size_t src_off : {0, 1, 8, 33}) {
        std::memset(target.data(), 0xA5, target.size());
        StreamingCopy(target.data() + 64 + dst_off, source.data() + src_off, n);
        ASSERT_EQ(std::memcmp(target.data() + 64 + dst_off, source.data() + src_off, n),
                  0)
            << "n=" << n << " dst_off=" << dst_off << " src_off=" << src_off;
        const size_t end = 64 + dst_off + n;
        ASSERT_EQ(std::memcmp(target.data(), untouched.data(), 64 + dst_off), 0) << n;
        ASSERT_EQ(std::memcmp(target.data() + end, untouched.data(), target.size() - end),
                  0)
            << "n=" << n << " dst_off=" << dst_off;
      }
    }
  }
}

}  // namespace
}  // namespace stoker
