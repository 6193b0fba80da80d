// Image decoding: encoded bytes (JPEG, PNG, WebP) -> RGB uint8, H x W x 3, row-major.
//
// Two phases, so nothing large is allocated for an image that will be refused:
//   1. ProbeImage reads only the header: format and dimensions.
//   2. DecodeImageInto writes the pixels into caller-owned memory of exactly
//      width * height * 3 bytes.
// DecodeImage does both with a BufferPool and enforces the pixel limit between them.
//
// Pixels match Pillow's `Image.open(f).convert("RGB")` (what Hugging Face processors
// feed the model): JPEG through libjpeg-turbo with its default (integer "slow" IDCT,
// fancy upsampling) settings; PNG losslessly with Pillow's mode conversions (alpha
// dropped, palette looked up, 16-bit colour reduced to its high byte, 16-bit grey
// clipped to 255 as Pillow's I;16 -> L conversion does); WebP through libwebp.
// EXIF orientation is not applied here.
//
// All functions are thread-safe and keep no state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "stoker/core/buffer_pool.h"
#include "stoker/core/status.h"

namespace stoker::codec {

enum class ImageFormat : uint8_t { kUnknown, kJpeg, kPng, kWebp };

std::string_view ImageFormatName(ImageFormat format);

// Pillow refuses images above 2 * Image.MAX_IMAGE_PIXELS (2 * 89,478,485 pixels) as
// decompression bombs; Stoker uses the same default.
inline constexpr int64_t kDefaultMaxImagePixels = 178'956'970;

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
  // True when Pillow would open the image in mode RGBA (PNG colour type 6, at 8 or 16
  // bits; WebP with alpha). Grey+alpha and palette transparency do not count: Pillow
  // opens those as LA / P, which the alpha-aware paths leave alone.
  bool has_alpha = false;
  int64_t pixels() const { return int64_t{width} * height; }
};

// Identifies the format from the magic bytes; kUnknown if none matches.
ImageFormat SniffFormat(std::span<const uint8_t> data);

// Reads dimensions from the header only. Errors: UnsupportedImage (not JPEG/PNG/WebP;
// the message names what the bytes look like), CorruptImage (header damaged or
// truncated, zero width or height).
Result<ImageInfo> ProbeImage(std::span<const uint8_t> data);

struct DecodeOptions {
  // Images with more pixels are refused (LimitExceeded) before any pixel memory is
  // allocated. <= 0 disables the check.
  int64_t max_pixels = kDefaultMaxImagePixels;
};

// Decodes into `out` (exactly info.width * info.height * 3 bytes, as probed).
// Errors: CorruptImage (damaged or truncated data), UnsupportedImage.
Status DecodeImageInto(std::span<const uint8_t> data, const ImageInfo& info,
                       std::span<uint8_t> out);

// Like DecodeImageInto, but keeps the alpha channel: `out` holds exactly
// info.width * info.height * 4 bytes, RGBA, with the colour channels Pillow's mode RGBA
// holds (16-bit PNG reduced to the high byte; alpha not premultiplied). Only for images
// with info.has_alpha (InvalidArgument otherwise).
Status DecodeImageRgbaInto(std::span<const uint8_t> data, const ImageInfo& info,
                           std::span<uint8_t> out);

struct DecodedImage {
  Buffer pixels;  // height * width * 3 bytes, RGB
  int width = 0;
  int height = 0;
};

// Probe, check the limit, take memory from `pool`, decode.
Result<DecodedImage> DecodeImage(std::span<const uint8_t> data, const DecodeOptions& options,
                                 BufferPool& pool);

namespace internal {
// Per-format halves of DecodeImageInto (jpeg.cc, png.cc, webp.cc).
Result<ImageInfo> ProbeJpeg(std::span<const uint8_t> data);
Result<ImageInfo> ProbePng(std::span<const uint8_t> data);
Result<ImageInfo> ProbeWebp(std::span<const uint8_t> data);
Status DecodeJpeg(std::span<const uint8_t> data, const ImageInfo& info,
                  std::span<uint8_t> out);
Status DecodePng(std::span<const uint8_t> data, const ImageInfo& info,
                 std::span<uint8_t> out);
Status DecodeWebp(std::span<const uint8_t> data, const ImageInfo& info,
                  std::span<uint8_t> out);
Status DecodePngRgba(std::span<const uint8_t> data, const ImageInfo& info,
                     std::span<uint8_t> out);
Status DecodeWebpRgba(std::span<const uint8_t> data, const ImageInfo& info,
                      std::span<uint8_t> out);
}  // namespace internal

}  // namespace stoker::codec
