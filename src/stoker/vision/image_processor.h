// The Qwen-VL image processor: RGB uint8 image -> rows of `pixel_values` plus its
// `image_grid_thw`, bit-exact with Hugging Face's Qwen2VLImageProcessor (slow, Pillow
// path) or Qwen2VLImageProcessorFast (torchvision path), chosen by `backend`.
//
// Two phases (shapes first, then work into caller memory):
//   1. Plan(height, width) applies the limits and smart_resize and says how many rows
//      of row_length() floats the image produces. Cheap; no pixels needed (the sizes
//      can come from an image header).
//   2. Run(plan, rgb, out, scratch) resizes, rescales, normalises and patchifies in one
//      sweep, writing exactly plan.num_patches() * row_length() floats into `out`.
//      Temporary memory lives in `scratch` (one per thread), which keeps its capacity,
//      so a warmed-up worker allocates nothing per image.
//
// An ImageProcessor is immutable after Make and safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/vision/patchify.h"
#include "stoker/vision/resize.h"
#include "stoker/vision/smart_resize.h"

namespace stoker::vision {

enum class ModelFamily : uint8_t { kQwen2Vl, kQwen25Vl, kQwen3Vl };

// "qwen2-vl", "qwen2.5-vl", "qwen3-vl" (also with '_' for '-').
Result<ModelFamily> ParseModelFamily(std::string_view name);
std::string_view ModelFamilyName(ModelFamily family);

struct ProcessorConfig {
  int patch_size = 14;           // P, pixels per patch side
  int merge_size = 2;            // m, patches per merge-group side
  int temporal_patch_size = 2;   // T, frames per patch (an image is repeated T times)
  std::array<double, 3> image_mean{};
  std::array<double, 3> image_std{};
  double rescale_factor = 1.0 / 255.0;
  int64_t min_pixels = 0;        // pixel-count range of the resized image
  int64_t max_pixels = 0;
  ResizeBackend backend = ResizeBackend::kTorchvision;
  SmartResizeRule size_rule = SmartResizeRule::kHuggingFace;
  // Pass order of the Pillow backend (see PillowPassOrder); Pillow 13 by default.
  PillowPassOrder pillow_order = PillowPassOrder::kReductionBased;
  // Source images with more pixels are refused before anything is allocated.
  // <= 0 disables the check. Pillow's decompression-bomb threshold by default.
  int64_t max_source_pixels = 178'956'970;

  int64_t factor() const { return int64_t{patch_size} * merge_size; }
};

// The values of the published checkpoints' preprocessor_config.json (min/max pixels
// 3136 / 12845056 with OpenAI CLIP mean/std for Qwen2-VL and Qwen2.5-VL; patch 16,
// 65536 / 16777216 and mean = std = 0.5 for Qwen3-VL).
ProcessorConfig DefaultProcessorConfig(ModelFamily family);

struct ImagePlan {
  int64_t height = 0;          // source
  int64_t width = 0;
  int64_t resized_height = 0;  // after smart_resize
  int64_t resized_width = 0;
  int64_t grid_t = 1;          // image_grid_thw row
  int64_t grid_h = 0;
  int64_t grid_w = 0;
  int64_t merge_size = 2;

  int64_t num_patches() const { return grid_t * grid_h * grid_w; }
  // LLM tokens the image expands to (patches / merge_size^2).
  int64_t visual_tokens() const { return num_patches() / (merge_size * merge_size); }
};

// Memory one thread reuses across images.
struct VisionScratch {
  ResizeScratch resize;
  std::vector<float> row;           // one pixel_values row, built in cache
  std::vector<uint8_t> decoded;     // decoded source (encoded-input path)
  std::vector<uint8_t> oriented;    // after EXIF transpose or alpha compositing
};

class ImageProcessor {
 public:
  // Errors: InvalidArgument for sizes that cannot work (non-positive patch/merge/
  // temporal sizes, zero std, min_pixels > max_pixels).
  static Result<ImageProcessor> Make(const ProcessorConfig& config);

  const ProcessorConfig& config() const { return config_; }
  // Floats per pixel_values row: 3 * T * P * P.
  int64_t row_length() const;

  // Errors: InvalidArgument (zero-sized image, aspect ratio above 200), LimitExceeded
  // (more source pixels than max_source_pixels).
  Result<ImagePlan> Plan(int64_t height, int64_t width) const;

  // `rgb`: plan.height x plan.width x 3 bytes, rows packed. `out`: exactly
  // plan.num_patches() * row_length() floats. Errors: InvalidArgument on size mismatch.
  Status Run(const ImagePlan& plan, std::span<const uint8_t> rgb, std::span<float> out,
             VisionScratch& scratch) const;

  // The normalised float for channel c and byte value v (the whole of rescale +
  // normalise, precomputed with the numerics of the configured backend).
  float NormalizedValue(int c, uint8_t v) const { return lut_[c][v]; }
  // Whether the SIMD arithmetic (NormalizeFormula) reproduces NormalizedValue for every
  // channel and byte, so Run may use it (otherwise Run looks values up in the table).
  bool normalize_formula_exact() const { return formula_exact_; }

 private:
  explicit ImageProcessor(const ProcessorConfig& config);
  bool FormulaMatchesTable() const;
  // Writes the rows of block row `bh` (m * P resized rows starting at `band`).
  void WriteBlockRow(const ImagePlan& plan, const uint8_t* band, float* out, bool stream,
                     float* row) const;

  ProcessorConfig config_;
  std::array<std::array<float, 256>, 3> lut_{};
  // The same values as arithmetic for the SIMD path; used only when it reproduces
  // lut_ exactly for every channel and byte (checked in the constructor).
  NormalizeFormula formula_;
  bool formula_exact_ = false;
};

// Rescale + normalise of one byte value, as Hugging Face computes it:
//   slow path (NumPy):  f32(f64(v) * rescale_factor), then f32 (x - mean) / std
//   fast path (torch):  (f32(v) - f32(mean * (1 / rescale_factor))) / f32(std * (1 / rescale_factor))
float NormalizeSlow(uint8_t v, double rescale_factor, double mean, double std);
float NormalizeFast(uint8_t v, double rescale_factor, double mean, double std);

}  // namespace stoker::vision
