#include "test_images.h"

#include <jpeglib.h>
#include <png.h>
#include <unistd.h>
#include <webp/encode.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace stoker::testing {

std::vector<uint8_t> MakeRgb(int width, int height, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  const int fx = 1 + static_cast<int>(rng() % 7), fy = 1 + static_cast<int>(rng() % 5);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * fx + y);
      p[1] = static_cast<uint8_t>(y * fy + (rng() & 15));
      p[2] = static_cast<uint8_t>((x ^ y) + (rng() & 7));
    }
  }
  return rgb;
}

Bytes EncodeJpeg(const std::vector<uint8_t>& rgb, int width, int height, int quality) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&rgb[static_cast<size_t>(cinfo.next_scanline) * width * 3]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes bytes(out, out + out_size);
  std::free(out);
  return bytes;
}

namespace {
void PngWrite(png_structp png, png_bytep data, size_t length) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + length);
}
void PngFlush(png_structp) {}

uint32_t Crc32(const uint8_t* data, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void PutBigEndian32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}
}  // namespace

Bytes EncodePng(const std::vector<uint8_t>& pixels, int width, int height, int color_type,
                int bit_depth, const std::vector<uint8_t>& palette) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  Bytes out;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("png encode failed");
  }
  png_set_write_fn(png, &out, PngWrite, PngFlush);
  png_set_IHDR(png, info, width, height, bit_depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    std::vector<png_color> colors(palette.size() / 3);
    for (size_t i = 0; i < colors.size(); ++i) {
      colors[i] = {palette[i * 3], palette[i * 3 + 1], palette[i * 3 + 2]};
    }
    png_set_PLTE(png, info, colors.data(), static_cast<int>(colors.size()));
  }
  png_write_info(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, const_cast<uint8_t*>(&pixels[row_bytes * y]));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Bytes EncodeWebpLossless(const std::vector<uint8_t>& rgb, int width, int height) {
  uint8_t* out = nullptr;
  const size_t size = WebPEncodeLosslessRGB(rgb.data(), width, height, width * 3, &out);
  if (size == 0) throw std::runtime_error("webp encode failed");
  Bytes bytes(out, out + size);
  WebPFree(out);
  return bytes;
}

Bytes PngHeaderOnly(uint32_t width, uint32_t height) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  PutBigEndian32(out, 13);
  const size_t chunk_start = out.size();
  for (char c : std::string("IHDR")) out.push_back(static_cast<uint8_t>(c));
  PutBigEndian32(out, width);
  PutBigEndian32(out, height);
  out.insert(out.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, no interlace
  PutBigEndian32(out, Crc32(&out[chunk_start], out.size() - chunk_start));
  return out;
}

void WriteFile(const std::filesystem::path& path, const Bytes& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  WriteFile(path, Bytes(text.begin(), text.end()));
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "stoker-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace stoker::testing
