// Target sizes for Qwen-VL images: the `smart_resize` rules of Hugging Face's Qwen2-VL
// image processor and of qwen-vl-utils, reproduced bit for bit.
//
// Both pick a size whose sides are multiples of `factor` (patch size x merge size), keep
// the aspect ratio roughly, and bring the pixel count into [min_pixels, max_pixels].
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "stoker/core/status.h"

namespace stoker::vision {

// Both implementations refuse images whose long side is more than this many times the
// short side ("absolute aspect ratio must be smaller than 200").
inline constexpr double kMaxAspectRatio = 200.0;

struct ResizedSize {
  int64_t height = 0;
  int64_t width = 0;
};

enum class SmartResizeRule : uint8_t {
  // transformers' smart_resize: round each side to the nearest multiple of `factor`
  // (ties to even), then rescale if the area is out of range; the result is clamped to
  // at least `factor` only when shrinking.
  kHuggingFace,
  // qwen-vl-utils' smart_resize: the rounded sides are clamped to at least `factor`
  // before the area test.
  kQwenVlUtils,
};

// Errors: InvalidArgument for a zero-sized image, an aspect ratio above 200, a
// non-positive factor, or limits that would give a zero-sized result.
Result<ResizedSize> SmartResize(int64_t height, int64_t width, int64_t factor,
                                int64_t min_pixels, int64_t max_pixels,
                                SmartResizeRule rule = SmartResizeRule::kHuggingFace);

}  // namespace stoker::vision
