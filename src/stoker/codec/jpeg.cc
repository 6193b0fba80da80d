// JPEG through libjpeg-turbo's libjpeg API with the library's default decompression
// parameters (JDCT_ISLOW, fancy upsampling), which is what Pillow uses. The libjpeg
// API rather than TurboJPEG because it lets us tell a truncated file (which Pillow
// refuses) from harmless warnings, and see CMYK images before colour conversion.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// jpeglib.h needs FILE and size_t declared before it.
#include <jerror.h>
#include <jpeglib.h>

#include "stoker/codec/image_decoder.h"

namespace stoker::codec::internal {

namespace {

uint16_t ReadBigEndian16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

bool IsStartOfFrame(uint8_t marker) {
  // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC), which share the range.
  return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
         marker != 0xCC;
}

struct ErrorManager {
  jpeg_error_mgr pub;  // must be first: libjpeg hands us a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
  // Set once every scanline has been delivered. Pillow stops there: running out of
  // data in jpeg_finish_decompress (while it looks for EOI) only suspends its decoder,
  // and it returns the complete image. A data shortfall from then on is not truncation.
  bool scanlines_done;
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int msg_level) {
  // Level -1 is a warning. libjpeg recovers from most (Pillow ignores them too), but
  // premature end of data means it padded the image with grey: Pillow reports such a
  // file as truncated, and so do we.
  // Only while pixels are still being decoded (see ErrorManager::scanlines_done).
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (msg_level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF && !err->scanlines_done) {
    err->truncated = true;
  }
}

// Pillow's CMYK -> RGB conversion (libImaging/Convert.c, cmyk2rgb): with nk = 255 - K,
// channel = clip(nk - nk * C / 255), where the division rounds as MULDIV255 does.
inline uint8_t CmykChannel(int c, int nk) {
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Pillow reads every CMYK JPEG with raw mode "CMYK;I" (it assumes Adobe's inverted
// convention), i.e. inverts all four channels before converting.
void CmykInvertedRowToRgb(const uint8_t* in, uint8_t* out, int width) {
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    const int c = 255 - in[0], m = 255 - in[1], y = 255 - in[2], k = 255 - in[3];
    const int nk = 255 - k;
    out[0] = CmykChannel(c, nk);
    out[1] = CmykChannel(m, nk);
    out[2] = CmykChannel(y, nk);
  }
}

}  // namespace

Result<ImageInfo> ProbeJpeg(std::span<const uint8_t> data) {
  // Walk the marker segments up to the first SOFn; no libjpeg state needed.
  size_t pos = 2;  // after SOI
  while (pos + 4 <= data.size()) {
    if (data[pos] != 0xFF) {
      return status::CorruptImage("JPEG: expected a marker at byte ", std::to_string(pos));
    }
    const uint8_t marker = data[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length field
      pos += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) {
      return status::CorruptImage("JPEG: no frame header before ",
                                  marker == 0xD9 ? "end of image" : "scan data");
    }
    const uint16_t length = ReadBigEndian16(&data[pos + 2]);
    if (length < 2) {
      return status::CorruptImage("JPEG: bad segment length at byte ", std::to_string(pos));
    }
    if (IsStartOfFrame(marker)) {
      if (pos + 9 > data.size() || length < 7) break;
      ImageInfo info;
      info.format = ImageFormat::kJpeg;
      info.height = ReadBigEndian16(&data[pos + 5]);
      info.width = ReadBigEndian16(&data[pos + 7]);
      return info;
    }
    pos += 2 + length;
  }
  return status::CorruptImage("JPEG: file ends before the frame header (",
                              std::to_string(data.size()), " bytes)");
}

Status DecodeJpeg(std::span<const uint8_t> data, const ImageInfo& info,
                  std::span<uint8_t> out) {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = OnError;
  err.pub.emit_message = OnMessage;
  err.truncated = false;
  err.scanlines_done = false;
  err.message[0] = '\0';
  // Scratch for one CMYK row, sized before setjmp: after it, no C++ object may change
  // in a way a longjmp could skip.
  std::vector<uint8_t> cmyk_row(static_cast<size_t>(info.width) * 4);

  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    if (err.truncated) {  // the real cause of e.g. "missing SOS marker"
      return status::CorruptImage("JPEG: file is truncated (", std::to_string(data.size()),
                                  " bytes): ", err.message);
    }
    return status::CorruptImage("JPEG: ", err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int>(cinfo.image_width) != info.width ||
      static_cast<int>(cinfo.image_height) != info.height) {
    jpeg_destroy_decompress(&cinfo);
    return status::CorruptImage("JPEG: frame header dimensions disagree");
  }
  const bool cmyk =
      cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);

  const size_t stride = static_cast<size_t>(info.width) * 3;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* dst = out.data() + stride * cinfo.output_scanline;
    JSAMPROW row = cmyk ? cmyk_row.data() : dst;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (cmyk) CmykInvertedRowToRgb(cmyk_row.data(), dst, info.width);
  }
  // Written through cinfo.err (the pointer libjpeg's callbacks use), so the store is
  // visible to OnMessage; `err` itself is not touched across the setjmp.
  reinterpret_cast<ErrorManager*>(cinfo.err)->scanlines_done = true;
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.truncated) {
    return status::CorruptImage("JPEG: file is truncated (", std::to_string(data.size()),
                                " bytes; premature end of data)");
  }
  return Status::OK();
}

}  // namespace stoker::codec::internal
