// WebP through libwebp's simple decoding API (fancy upsampling for lossy images, as
// in Pillow, which also decodes with libwebp); alpha is dropped by DecodeWebp and kept
// by DecodeWebpRgba.
#include <webp/decode.h>

#include <string>

#include "stoker/codec/image_decoder.h"

namespace stoker::codec::internal {

Result<ImageInfo> ProbeWebp(std::span<const uint8_t> data) {
  WebPBitstreamFeatures features;
  const VP8StatusCode code = WebPGetFeatures(data.data(), data.size(), &features);
  if (code == VP8_STATUS_NOT_ENOUGH_DATA) {
    return status::CorruptImage("WebP: file is truncated (", std::to_string(data.size()),
                                " bytes)");
  }
  if (code != VP8_STATUS_OK) {
    return status::CorruptImage("WebP: bad header (libwebp status ",
                                std::to_string(static_cast<int>(code)), ")");
  }
  if (features.has_animation) {
    return status::UnsupportedImage("WebP: animated images are not supported");
  }
  ImageInfo info;
  info.format = ImageFormat::kWebp;
  info.width = features.width;
  info.height = features.height;
  info.has_alpha = features.has_alpha != 0;
  return info;
}

Status DecodeWebp(std::span<const uint8_t> data, const ImageInfo& info,
                  std::span<uint8_t> out) {
  const int stride = info.width * 3;
  if (WebPDecodeRGBInto(data.data(), data.size(), out.data(), out.size(), stride) ==
      nullptr) {
    return status::CorruptImage("WebP: bitstream is damaged or truncated");
  }
  return Status::OK();
}

Status DecodeWebpRgba(std::span<const uint8_t> data, const ImageInfo& info,
                      std::span<uint8_t> out) {
  const int stride = info.width * 4;
  if (WebPDecodeRGBAInto(data.data(), data.size(), out.data(), out.size(), stride) ==
      nullptr) {
    return status::CorruptImage("WebP: bitstream is damaged or truncated");
  }
  return Status::OK();
}

}  // namespace stoker::codec::internal
