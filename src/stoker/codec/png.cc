// PNG through libpng, converted to RGB exactly as Pillow's convert("RGB") does for the
// mode Pillow opens each PNG variant in (see image_decoder.h).
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "stoker/codec/image_decoder.h"

namespace stoker::codec::internal {

namespace {

uint32_t ReadBigEndian32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

struct ReadContext {
  std::span<const uint8_t> data;
  size_t pos;
  char message[256];
};

void OnError(png_structp png, png_const_charp message) {
  auto* ctx = static_cast<ReadContext*>(png_get_error_ptr(png));
  std::strncpy(ctx->message, message, sizeof(ctx->message) - 1);
  ctx->message[sizeof(ctx->message) - 1] = '\0';
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // ancillary-chunk trouble; Pillow ignores it too

void OnRead(png_structp png, png_bytep out, size_t length) {
  auto* ctx = static_cast<ReadContext*>(png_get_io_ptr(png));
  if (ctx->pos + length > ctx->data.size()) {
    png_error(png, "file is truncated");
  }
  std::memcpy(out, ctx->data.data() + ctx->pos, length);
  ctx->pos += length;
}

// Rows as libpng delivers them after our transforms -> RGB, following Pillow:
//   8-bit grey (L, and 1/2/4-bit expanded), grey+alpha (LA): R=G=B=L, alpha dropped;
//   RGBA (also palette+tRNS expanded): alpha dropped;
//   16-bit colour or grey+alpha: Pillow unpacks the high byte ("RGB;16B", "LA;16B");
//   16-bit grey: Pillow opens mode I;16, whose conversion to L gives 255 when the high
//   byte is set and the low byte otherwise.
void RowToRgb(const uint8_t* in, uint8_t* out, int width, int channels, int bit_depth) {
  if (bit_depth == 16) {
    if (channels == 1) {
      for (int x = 0; x < width; ++x, in += 2, out += 3) {
        const uint8_t v = in[0] != 0 ? 255 : in[1];
        out[0] = out[1] = out[2] = v;
      }
      return;
    }
    const int step = channels * 2;
    for (int x = 0; x < width; ++x, in += step, out += 3) {
      if (channels <= 2) {
        out[0] = out[1] = out[2] = in[0];
      } else {
        out[0] = in[0];
        out[1] = in[2];
        out[2] = in[4];
      }
    }
    return;
  }
  for (int x = 0; x < width; ++x, in += channels, out += 3) {
    if (channels <= 2) {
      out[0] = out[1] = out[2] = in[0];
    } else {
      out[0] = in[0];
      out[1] = in[1];
      out[2] = in[2];
    }
  }
}

}  // namespace

Result<ImageInfo> ProbePng(std::span<const uint8_t> data) {
  // Signature (8) + IHDR length (4) + "IHDR" (4) + width (4) + height (4).
  if (data.size() < 24 || std::memcmp(data.data() + 12, "IHDR", 4) != 0) {
    return status::CorruptImage("PNG: missing or truncated IHDR header (",
                                std::to_string(data.size()), " bytes)");
  }
  const uint32_t width = ReadBigEndian32(data.data() + 16);
  const uint32_t height = ReadBigEndian32(data.data() + 20);
  // The PNG specification caps each dimension at 2^31 - 1.
  if (width > 0x7FFFFFFFu || height > 0x7FFFFFFFu) {
    return status::CorruptImage("PNG: IHDR dimensions out of range");
  }
  ImageInfo info;
  info.format = ImageFormat::kPng;
  info.width = static_cast<int>(width);
  info.height = static_cast<int>(height);
  // IHDR colour type (byte 25) 6 = truecolour with alpha: Pillow mode RGBA.
  constexpr uint8_t kColorTypeRgba = 6;
  info.has_alpha = data.size() > 25 && data[25] == kColorTypeRgba;
  return info;
}

namespace {

// RGBA rows (8 or 16 bits per channel) -> RGBA bytes; 16-bit keeps the high byte, as
// Pillow's "RGBA;16B" unpacker does.
void RowToRgba(const uint8_t* in, uint8_t* out, int width, int bit_depth) {
  if (bit_depth == 8) {
    std::memcpy(out, in, static_cast<size_t>(width) * 4);
    return;
  }
  for (int x = 0; x < width; ++x, in += 8, out += 4) {
    out[0] = in[0];
    out[1] = in[2];
    out[2] = in[4];
    out[3] = in[6];
  }
}

// Shared by DecodePng (out_channels 3) and DecodePngRgba (4, colour type RGBA only).
Status DecodePngTo(std::span<const uint8_t> data, const ImageInfo& info,
                   std::span<uint8_t> out, int out_channels) {
  ReadContext ctx{data, 0, {0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &ctx, OnError, OnWarning);
  if (png == nullptr) return status::Internal("PNG: could not create decoder");
  png_infop png_info = png_create_info_struct(png);
  if (png_info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return status::Internal("PNG: could not create decoder");
  }
  // Scratch sized before setjmp (see jpeg.cc): raw rows when they cannot go straight
  // into `out`, and the row pointers libpng fills (all rows at once, for Adam7).
  std::vector<png_bytep> rows(static_cast<size_t>(info.height));
  std::vector<uint8_t> raw;

  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &png_info, nullptr);
    return status::CorruptImage("PNG: ", ctx.message);
  }
  png_set_read_fn(png, &ctx, OnRead);
  png_read_info(png, png_info);
  if (static_cast<int>(png_get_image_width(png, png_info)) != info.width ||
      static_cast<int>(png_get_image_height(png, png_info)) != info.height) {
    png_destroy_read_struct(&png, &png_info, nullptr);
    return status::CorruptImage("PNG: header dimensions disagree");
  }
  const int color_type = png_get_color_type(png, png_info);
  const int source_depth = png_get_bit_depth(png, png_info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && source_depth < 8) {
    // 1/2/4-bit grey scale by bit replication (x255, x85, x17), as Pillow's
    // "1", "L;2" and "L;4" unpackers do.
    png_set_expand_gray_1_2_4_to_8(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, png_info);
  const int channels = png_get_channels(png, png_info);
  const int bit_depth = png_get_bit_depth(png, png_info);
  const size_t row_bytes = png_get_rowbytes(png, png_info);

  if (out_channels == 4 && channels != 4) {
    png_destroy_read_struct(&png, &png_info, nullptr);
    return status::UnsupportedImage("PNG: RGBA output requested for an image without alpha");
  }
  const size_t out_stride = static_cast<size_t>(info.width) * out_channels;
  const bool direct = channels == out_channels && bit_depth == 8;
  if (!direct) raw.resize(row_bytes * static_cast<size_t>(info.height));
  for (int y = 0; y < info.height; ++y) {
    rows[y] = direct ? out.data() + out_stride * y : raw.data() + row_bytes * y;
  }
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &png_info, nullptr);
  if (!direct) {
    for (int y = 0; y < info.height; ++y) {
      if (out_channels == 4) {
        RowToRgba(raw.data() + row_bytes * y, out.data() + out_stride * y, info.width,
                  bit_depth);
      } else {
        RowToRgb(raw.data() + row_bytes * y, out.data() + out_stride * y, info.width,
                 channels, bit_depth);
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status DecodePng(std::span<const uint8_t> data, const ImageInfo& info,
                 std::span<uint8_t> out) {
  return DecodePngTo(data, info, out, 3);
}

Status DecodePngRgba(std::span<const uint8_t> data, const ImageInfo& info,
                     std::span<uint8_t> out) {
  return DecodePngTo(data, info, out, 4);
}

}  // namespace stoker::codec::internal
