#include "stoker/codec/image_decoder.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace stoker::codec {

namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool StartsWith(std::span<const uint8_t> data, std::string_view prefix, size_t at = 0) {
  return data.size() >= at + prefix.size() &&
         std::memcmp(data.data() + at, prefix.data(), prefix.size()) == 0;
}

// Names formats we recognise but do not decode, so the error says "GIF", not "unknown".
std::string DescribeUnknown(std::span<const uint8_t> data) {
  if (data.empty()) return "empty file (0 bytes)";
  if (StartsWith(data, "GIF8")) return "GIF image (not supported)";
  if (StartsWith(data, "BM")) return "BMP image (not supported)";
  if (StartsWith(data, "II*") || StartsWith(data, "MM")) return "TIFF image (not supported)";
  if (StartsWith(data, "ftyp", 4)) return "HEIF/AVIF image (not supported)";
  if (StartsWith(data, "RIFF")) return "RIFF file that is not WebP";
  std::string hex = "unknown image format (first bytes:";
  for (size_t i = 0; i < data.size() && i < 8; ++i) {
    char byte[4];
    std::snprintf(byte, sizeof(byte), " %02x", data[i]);
    hex += byte;
  }
  return hex + ")";
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat SniffFormat(std::span<const uint8_t> data) {
  if (data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (data.size() >= 8 && std::memcmp(data.data(), kPngSignature, 8) == 0) {
    return ImageFormat::kPng;
  }
  if (StartsWith(data, "RIFF") && StartsWith(data, "WEBP", 8)) return ImageFormat::kWebp;
  return ImageFormat::kUnknown;
}

Result<ImageInfo> ProbeImage(std::span<const uint8_t> data) {
  Result<ImageInfo> info = status::Internal("unreachable");
  switch (SniffFormat(data)) {
    case ImageFormat::kJpeg: info = internal::ProbeJpeg(data); break;
    case ImageFormat::kPng: info = internal::ProbePng(data); break;
    case ImageFormat::kWebp: info = internal::ProbeWebp(data); break;
    case ImageFormat::kUnknown: return status::UnsupportedImage(DescribeUnknown(data));
  }
  if (info.ok() && (info->width <= 0 || info->height <= 0)) {
    return status::CorruptImage(ImageFormatName(info->format), " header declares a ",
                                std::to_string(info->width), "x",
                                std::to_string(info->height), " image");
  }
  return info;
}

Status DecodeImageInto(std::span<const uint8_t> data, const ImageInfo& info,
                       std::span<uint8_t> out) {
  const size_t expected = static_cast<size_t>(info.pixels()) * 3;
  if (out.size() != expected) {
    return status::InvalidArgument("output buffer has ", std::to_string(out.size()),
                                   " bytes, image needs ", std::to_string(expected));
  }
  switch (info.format) {
    case ImageFormat::kJpeg: return internal::DecodeJpeg(data, info, out);
    case ImageFormat::kPng: return internal::DecodePng(data, info, out);
    case ImageFormat::kWebp: return internal::DecodeWebp(data, info, out);
    case ImageFormat::kUnknown: break;
  }
  return status::UnsupportedImage(DescribeUnknown(data));
}

Status DecodeImageRgbaInto(std::span<const uint8_t> data, const ImageInfo& info,
                           std::span<uint8_t> out) {
  if (!info.has_alpha) {
    return status::InvalidArgument(ImageFormatName(info.format),
                                   " image has no alpha channel to decode");
  }
  const size_t expected = static_cast<size_t>(info.pixels()) * 4;
  if (out.size() != expected) {
    return status::InvalidArgument("output buffer has ", std::to_string(out.size()),
                                   " bytes, RGBA image needs ", std::to_string(expected));
  }
  switch (info.format) {
    case ImageFormat::kPng: return internal::DecodePngRgba(data, info, out);
    case ImageFormat::kWebp: return internal::DecodeWebpRgba(data, info, out);
    default: break;
  }
  return status::UnsupportedImage(ImageFormatName(info.format), " has no alpha channel");
}

Result<DecodedImage> DecodeImage(std::span<const uint8_t> data, const DecodeOptions& options,
                                 BufferPool& pool) {
  STOKER_ASSIGN_OR_RETURN(ImageInfo info, ProbeImage(data));
  if (options.max_pixels > 0 && info.pixels() > options.max_pixels) {
    return status::LimitExceeded(
        ImageFormatName(info.format), " header declares ", std::to_string(info.width), "x",
        std::to_string(info.height), " = ", std::to_string(info.pixels()),
        " pixels, above the limit of ", std::to_string(options.max_pixels),
        " (max_image_pixels)");
  }
  const size_t bytes = static_cast<size_t>(info.pixels()) * 3;
  STOKER_ASSIGN_OR_RETURN(Buffer pixels, pool.Acquire(bytes));
  STOKER_RETURN_NOT_OK(DecodeImageInto(data, info, {pixels.data(), bytes}));
  return DecodedImage{std::move(pixels), info.width, info.height};
}

}  // namespace stoker::codec
