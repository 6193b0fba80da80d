#include "stoker/vision/output_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace stoker::vision {
namespace {

// Writes every float of `n` at `p` and checks them back.
void FillAndCheck(float* p, size_t n, float seed) {
  for (size_t i = 0; i < n; ++i) p[i] = seed + static_cast<float>(i % 1000);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(p[i], seed + static_cast<float>(i % 1000));
  ASSERT_EQ(p[n - 1], seed + static_cast<float>((n - 1) % 1000));
}

TEST(OutputBufferTest, ReleasedOutputsAreReusedWithinBounds) {
  constexpr size_t kFloats = size_t{12} << 20;  // 48 MiB: a 64 MiB mapping
  float* first_address = nullptr;
  {
    std::shared_ptr<float> a = AllocateOutput(kFloats);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(a.get()) % 64, 0u);
    FillAndCheck(a.get(), kFloats, 1.0f);
    first_address = a.get();
  }
  const size_t kept = KeptOutputBytes();
  EXPECT_GE(kept, kFloats * sizeof(float));
  {
    // A similar size reuses the mapping; it is writable and holds what is written.
    std::shared_ptr<float> b = AllocateOutput(kFloats - 1000);
    EXPECT_EQ(b.get(), first_address);
    EXPECT_LT(KeptOutputBytes(), kept);
    FillAndCheck(b.get(), kFloats - 1000, 2.0f);
    // Held outputs are never handed out twice.
    std::shared_ptr<float> c = AllocateOutput(kFloats);
    EXPECT_NE(c.get(), b.get());
    FillAndCheck(c.get(), kFloats, 3.0f);
    FillAndCheck(b.get(), kFloats - 1000, 2.0f);
  }
  {
    // Much smaller outputs do not take a large mapping.
    std::shared_ptr<float> small = AllocateOutput(size_t{1} << 20);  // 4 MiB
    EXPECT_NE(small.get(), first_address);
    FillAndCheck(small.get(), size_t{1} << 20, 4.0f);
  }
  // However many are released, at most kMaxKeptOutputs mappings and
  // kMaxKeptOutputBytes stay.
  std::vector<std::shared_ptr<float>> many;
  for (size_t i = 0; i < kMaxKeptOutputs + 3; ++i) many.push_back(AllocateOutput(kFloats));
  many.clear();
  EXPECT_LE(KeptOutputBytes(), kMaxKeptOutputs * (size_t{64} << 20));
  EXPECT_LE(KeptOutputBytes(), kMaxKeptOutputBytes);
  // Small outputs come from the heap, aligned.
  std::shared_ptr<float> tiny = AllocateOutput(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tiny.get()) % 64, 0u);
  FillAndCheck(tiny.get(), 100, 5.0f);
}

}  // namespace
}  // namespace stoker::vision
