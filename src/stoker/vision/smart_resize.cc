#include "stoker/vision/smart_resize.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace stoker::vision {

namespace {

// Python's round() on a double rounds ties to even; std::nearbyint does the same under
// the default rounding mode, std::round would not (70 / 28 = 2.5 must give 2).
int64_t PyRound(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

Result<ResizedSize> SmartResize(int64_t height, int64_t width, int64_t factor,
                                int64_t min_pixels, int64_t max_pixels,
                                SmartResizeRule rule) {
  if (height <= 0 || width <= 0) {
    return status::InvalidArgument("image is ", std::to_string(width), "x",
                                   std::to_string(height), ": nothing to resize");
  }
  if (factor <= 0) return status::InvalidArgument("resize factor must be positive");
  const double ratio = static_cast<double>(std::max(height, width)) /
                       static_cast<double>(std::min(height, width));
  if (ratio > kMaxAspectRatio) {
    return status::InvalidArgument("image is ", std::to_string(width), "x",
                                   std::to_string(height),
                                   ": aspect ratio above the limit of 200");
  }
  const double f = static_cast<double>(factor);
  int64_t h_bar = PyRound(static_cast<double>(height) / f) * factor;
  int64_t w_bar = PyRound(static_cast<double>(width) / f) * factor;
  if (rule == SmartResizeRule::kQwenVlUtils) {
    h_bar = std::max(factor, h_bar);
    w_bar = std::max(factor, w_bar);
  }
  const double area = static_cast<double>(height * width);
  if (h_bar * w_bar > max_pixels) {
    // Divisions evaluated left to right, as Python does: height / beta / factor.
    const double beta = std::sqrt(area / static_cast<double>(max_pixels));
    h_bar = std::max<int64_t>(
        factor, static_cast<int64_t>(std::floor(static_cast<double>(height) / beta / f)) * factor);
    w_bar = std::max<int64_t>(
        factor, static_cast<int64_t>(std::floor(static_cast<double>(width) / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / area);
    h_bar = static_cast<int64_t>(std::ceil(static_cast<double>(height) * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(static_cast<double>(width) * beta / f)) * factor;
  }
  if (h_bar <= 0 || w_bar <= 0) {
    return status::InvalidArgument("smart_resize of ", std::to_string(width), "x",
                                   std::to_string(height), " gives an empty image (min_pixels ",
                                   std::to_string(min_pixels), ", max_pixels ",
                                   std::to_string(max_pixels), ")");
  }
  return ResizedSize{h_bar, w_bar};
}

}  // namespace stoker::vision
