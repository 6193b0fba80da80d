// Test helpers: encode small images in memory (with the same libraries the decoders
// use) and lay out temporary datasets, so C++ tests need no fixture files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace stoker::testing {

using Bytes = std::vector<uint8_t>;

// Deterministic pseudo-random RGB pixels (H * W * 3), smooth enough to compress.
std::vector<uint8_t> MakeRgb(int width, int height, uint32_t seed);

Bytes EncodeJpeg(const std::vector<uint8_t>& rgb, int width, int height, int quality);
// color_type: PNG_COLOR_TYPE_*; `pixels` holds rows of width * channels samples of
// bit_depth (16-bit samples big-endian). `palette` (RGB triples) for palette images.
Bytes EncodePng(const std::vector<uint8_t>& pixels, int width, int height, int color_type,
                int bit_depth, const std::vector<uint8_t>& palette = {});
Bytes EncodeWebpLossless(const std::vector<uint8_t>& rgb, int width, int height);

// A PNG signature + IHDR declaring width x height, with a valid CRC, and nothing else.
Bytes PngHeaderOnly(uint32_t width, uint32_t height);

void WriteFile(const std::filesystem::path& path, const Bytes& bytes);
void WriteFile(const std::filesystem::path& path, const std::string& text);

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace stoker::testing
