#include "stoker/vision/encoded_image.h"

#include <string>
#include <utility>

#include "stoker/codec/exif.h"
#include "stoker/codec/image_decoder.h"

namespace stoker::vision {

namespace {

constexpr int kChannels = 3;

}  // namespace

void CompositeOnWhite(const uint8_t* rgba, size_t pixels, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i, rgba += 4, rgb += 3) {
    const uint32_t a = rgba[3];
    for (int c = 0; c < 3; ++c) {
      const uint32_t v = 255 * (255 - a) + rgba[c] * a + 128;
      rgb[c] = static_cast<uint8_t>((v + (v >> 8)) >> 8);
    }
  }
}

Result<ImagePlan> PlanEncodedImage(const ImageProcessor& processor,
                                   std::span<const uint8_t> data,
                                   const EncodedImageOptions& options) {
  STOKER_ASSIGN_OR_RETURN(codec::ImageInfo info, codec::ProbeImage(data));
  int64_t height = info.height, width = info.width;
  if (options.exif_transpose && info.format == codec::ImageFormat::kJpeg &&
      codec::OrientationSwapsAxes(codec::ReadExifOrientation(data))) {
    std::swap(height, width);
  }
  return processor.Plan(height, width);
}

Status RunEncodedImage(const ImageProcessor& processor, const ImagePlan& plan,
                       std::span<const uint8_t> data, const EncodedImageOptions& options,
                       std::span<float> out, VisionScratch& scratch) {
  STOKER_ASSIGN_OR_RETURN(codec::ImageInfo info, codec::ProbeImage(data));
  const int orientation = options.exif_transpose && info.format == codec::ImageFormat::kJpeg
                              ? codec::ReadExifOrientation(data)
                              : 1;
  const bool swap = codec::OrientationSwapsAxes(orientation);
  if ((swap ? info.width : info.height) != plan.height ||
      (swap ? info.height : info.width) != plan.width) {
    return status::InvalidArgument("plan is for a ", std::to_string(plan.width), "x",
                                   std::to_string(plan.height), " image, the data holds ",
                                   std::to_string(info.width), "x",
                                   std::to_string(info.height));
  }
  const size_t pixels = static_cast<size_t>(info.pixels());
  std::vector<uint8_t>* rgb = &scratch.decoded;
  if (options.alpha_to_white && info.has_alpha) {
    scratch.oriented.resize(pixels * 4);
    STOKER_RETURN_NOT_OK(codec::DecodeImageRgbaInto(data, info, scratch.oriented));
    scratch.decoded.resize(pixels * kChannels);
    CompositeOnWhite(scratch.oriented.data(), pixels, scratch.decoded.data());
  } else {
    scratch.decoded.resize(pixels * kChannels);
    STOKER_RETURN_NOT_OK(codec::DecodeImageInto(data, info, scratch.decoded));
  }
  if (orientation != 1) {
    scratch.oriented.resize(pixels * kChannels);
    codec::ApplyExifOrientation(scratch.decoded.data(), info.width, info.height, kChannels,
                                orientation, scratch.oriented.data());
    rgb = &scratch.oriented;
  }
  return processor.Run(plan, std::span<const uint8_t>(rgb->data(), pixels * kChannels), out,
                       scratch);
}

}  // namespace stoker::vision
