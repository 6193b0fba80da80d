#include "stoker/vision/image_processor.h"

#include <cstring>
#include <string>


namespace stoker::vision {

namespace {

// OpenAI CLIP statistics (transformers utils/constants.py OPENAI_CLIP_MEAN/STD), used
// by Qwen2-VL and Qwen2.5-VL; Qwen3-VL uses 0.5 / 0.5.
constexpr std::array<double, 3> kClipMean = {0.48145466, 0.4578275, 0.40821073};
constexpr std::array<double, 3> kClipStd = {0.26862954, 0.26130258, 0.27577711};
constexpr int kChannels = 3;

// Outputs at least this large are written with non-temporal stores: they do not fit
// in cache anyway, and streaming them saves reading every line before writing it.
constexpr size_t kStreamMinBytes = size_t{4} << 20;

}  // namespace

Result<ModelFamily> ParseModelFamily(std::string_view name) {
  std::string n(name);
  for (char& c : n) {
    if (c == '_') c = '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (n == "qwen2-vl") return ModelFamily::kQwen2Vl;
  if (n == "qwen2.5-vl") return ModelFamily::kQwen25Vl;
  if (n == "qwen3-vl") return ModelFamily::kQwen3Vl;
  return status::InvalidArgument("unknown model family '", name,
                                 "' (expected qwen2-vl, qwen2.5-vl or qwen3-vl)");
}

std::string_view ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kQwen2Vl: return "qwen2-vl";
    case ModelFamily::kQwen25Vl: return "qwen2.5-vl";
    case ModelFamily::kQwen3Vl: return "qwen3-vl";
  }
  return "unknown";
}

ProcessorConfig DefaultProcessorConfig(ModelFamily family) {
  ProcessorConfig c;
  c.temporal_patch_size = 2;
  c.merge_size = 2;
  if (family == ModelFamily::kQwen3Vl) {
    c.patch_size = 16;
    c.image_mean = {0.5, 0.5, 0.5};
    c.image_std = {0.5, 0.5, 0.5};
    c.min_pixels = 65'536;       // size.shortest_edge = 64 * 32^2
    c.max_pixels = 16'777'216;   // size.longest_edge = 16384 * 32^2
  } else {
    c.patch_size = 14;
    c.image_mean = kClipMean;
    c.image_std = kClipStd;
    c.min_pixels = 3'136;        // 4 * 28^2
    c.max_pixels = 12'845'056;   // 16384 * 28^2
  }
  return c;
}

float NormalizeSlow(uint8_t v, double rescale_factor, double mean, double std) {
  const float r = static_cast<float>(static_cast<double>(v) * rescale_factor);
  const float d = r - static_cast<float>(mean);
  return d / static_cast<float>(std);
}

float NormalizeFast(uint8_t v, double rescale_factor, double mean, double std) {
  // 1 / rescale_factor is computed in double (Python), then applied to the float32
  // mean/std tensors in float32.
  const float inverse = static_cast<float>(1.0 / rescale_factor);
  const float m = static_cast<float>(mean) * inverse;
  const float s = static_cast<float>(std) * inverse;
  const float d = static_cast<float>(v) - m;
  return d / s;
}

ImageProcessor::ImageProcessor(const ProcessorConfig& config) : config_(config) {
  // The float32 operands of each path's formula: the fast path subtracts and divides by
  // mean and std scaled by 1 / rescale_factor; the slow path rescales first, which
  // equals a float32 division by 1 / rescale_factor when the check below says so.
  const float inverse = static_cast<float>(1.0 / config.rescale_factor);
  for (int c = 0; c < kChannels; ++c) {
    if (config.backend == ResizeBackend::kPillow) {
      formula_.divisor = inverse;
      formula_.mean[c] = static_cast<float>(config.image_mean[c]);
      formula_.std[c] = static_cast<float>(config.image_std[c]);
    } else {
      formula_.mean[c] = static_cast<float>(config.image_mean[c]) * inverse;
      formula_.std[c] = static_cast<float>(config.image_std[c]) * inverse;
    }
  }
  for (int c = 0; c < kChannels; ++c) {
    for (int v = 0; v < 256; ++v) {
      const auto byte = static_cast<uint8_t>(v);
      lut_[c][v] = config.backend == ResizeBackend::kPillow
                       ? NormalizeSlow(byte, config.rescale_factor, config.image_mean[c],
                                       config.image_std[c])
                       : NormalizeFast(byte, config.rescale_factor, config.image_mean[c],
                                       config.image_std[c]);
    }
  }
  formula_exact_ = FormulaMatchesTable();
}

bool ImageProcessor::FormulaMatchesTable() const {
  for (int c = 0; c < kChannels; ++c) {
    for (int v = 0; v < 256; ++v) {
      const float simd = formula_.Apply(c, static_cast<uint8_t>(v));
      if (std::memcmp(&simd, &lut_[c][v], sizeof(float)) != 0) return false;
    }
  }
  return true;
}

Result<ImageProcessor> ImageProcessor::Make(const ProcessorConfig& config) {
  if (config.patch_size <= 0 || config.merge_size <= 0 || config.temporal_patch_size <= 0) {
    return status::InvalidArgument("patch_size, merge_size and temporal_patch_size must be "
                                   "positive");
  }
  for (double s : config.image_std) {
    if (s == 0.0) return status::InvalidArgument("image_std must not contain 0");
  }
  if (config.rescale_factor <= 0.0) {
    return status::InvalidArgument("rescale_factor must be positive");
  }
  if (config.min_pixels > config.max_pixels) {
    return status::InvalidArgument("min_pixels (", std::to_string(config.min_pixels),
                                   ") is above max_pixels (",
                                   std::to_string(config.max_pixels), ")");
  }
  return ImageProcessor(config);
}

int64_t ImageProcessor::row_length() const {
  return int64_t{kChannels} * config_.temporal_patch_size * config_.patch_size *
         config_.patch_size;
}

Result<ImagePlan> ImageProcessor::Plan(int64_t height, int64_t width) const {
  if (height <= 0 || width <= 0) {
    return status::InvalidArgument("image is ", std::to_string(width), "x",
                                   std::to_string(height), " (zero-sized)");
  }
  if (config_.max_source_pixels > 0 && height * width > config_.max_source_pixels) {
    return status::LimitExceeded("image is ", std::to_string(width), "x",
                                 std::to_string(height), " = ",
                                 std::to_string(height * width),
                                 " pixels, above the limit of ",
                                 std::to_string(config_.max_source_pixels),
                                 " (max_image_pixels)");
  }
  STOKER_ASSIGN_OR_RETURN(ResizedSize size,
                          SmartResize(height, width, config_.factor(), config_.min_pixels,
                                      config_.max_pixels, config_.size_rule));
  ImagePlan plan;
  plan.height = height;
  plan.width = width;
  plan.resized_height = size.height;
  plan.resized_width = size.width;
  plan.grid_t = 1;  // one image = one temporal group (the frame is repeated T times)
  plan.grid_h = size.height / config_.patch_size;
  plan.grid_w = size.width / config_.patch_size;
  plan.merge_size = config_.merge_size;
  return plan;
}

// pixel_values[r][q] = frame[tp][c][(bh*m + mh)*P + py][(bw*m + mw)*P + px] with
//   r = ((bh*Wb + bw)*m + mh)*m + mw,   q = ((c*T + tp)*P + py)*P + px
// (Hugging Face's reshape [T, C, Hb, m, P, Wb, m, P] -> permute -> flatten, in closed
// form). Every temporal copy is the same image, so each P x P block is written T times.
// The rows of one block row bh come from the m * P resized rows in `band` and are
// consecutive in `out`. With `stream`, each row is built in `row` (cache) and stored
// to `out` with non-temporal stores, so the output never passes through the cache.
void ImageProcessor::WriteBlockRow(const ImagePlan& plan, const uint8_t* band, float* out,
                                   bool stream, float* row) const {
  const int64_t p = config_.patch_size;
  const int64_t m = config_.merge_size;
  const int64_t t = config_.temporal_patch_size;
  const int64_t wb = plan.grid_w / m;
  const size_t stride = static_cast<size_t>(plan.resized_width) * kChannels;
  const size_t block = static_cast<size_t>(p * p);
  const size_t length = static_cast<size_t>(row_length());
  if (formula_exact_ &&
      WritePatchRowsSimd(band, stride, wb, static_cast<int>(m), static_cast<int>(p),
                         static_cast<int>(t), formula_, out, stream, row)) {
    return;
  }
  for (int64_t bw = 0; bw < wb; ++bw) {
    for (int64_t mh = 0; mh < m; ++mh) {
      for (int64_t mw = 0; mw < m; ++mw) {
        const uint8_t* origin = band + stride * (mh * p) + (bw * m + mw) * p * kChannels;
        float* dst_row = stream ? row : out;
        for (int c = 0; c < kChannels; ++c) {
          const std::array<float, 256>& lut = lut_[c];
          float* first = dst_row + static_cast<size_t>(c * t) * block;
          float* dst = first;
          for (int64_t py = 0; py < p; ++py) {
            const uint8_t* src = origin + stride * py + c;
            for (int64_t px = 0; px < p; ++px) dst[px] = lut[src[px * kChannels]];
            dst += p;
          }
          for (int64_t tp = 1; tp < t; ++tp) {
            std::memcpy(first + tp * block, first, block * sizeof(float));
          }
        }
        if (stream) StreamFloats(row, length, out);
        out += length;
      }
    }
  }
}

Status ImageProcessor::Run(const ImagePlan& plan, std::span<const uint8_t> rgb,
                           std::span<float> out, VisionScratch& scratch) const {
  const size_t in_bytes = static_cast<size_t>(plan.height * plan.width) * kChannels;
  if (rgb.size() != in_bytes) {
    return status::InvalidArgument("image buffer has ", std::to_string(rgb.size()),
                                   " bytes, a ", std::to_string(plan.width), "x",
                                   std::to_string(plan.height), " RGB image needs ",
                                   std::to_string(in_bytes));
  }
  const size_t out_floats = static_cast<size_t>(plan.num_patches() * row_length());
  if (out.size() != out_floats) {
    return status::InvalidArgument("output has room for ", std::to_string(out.size()),
                                   " floats, the image needs ", std::to_string(out_floats));
  }
  // The resize runs one block row (m * P resized rows) at a time, and each band is
  // patchified while it is in cache: no resized image goes through memory.
  ResizeOptions options;
  options.backend = config_.backend;
  options.pillow_order = config_.pillow_order;
  RowResizer resizer;
  resizer.Start(rgb.data(), static_cast<int>(plan.width), static_cast<int>(plan.height),
                static_cast<int>(plan.resized_width), static_cast<int>(plan.resized_height),
                options, scratch.resize);
  const bool stream = out_floats * sizeof(float) >= kStreamMinBytes;
  if (stream) scratch.row.resize(static_cast<size_t>(row_length()));
  const int64_t band_rows = config_.patch_size * config_.merge_size;
  const size_t block_row_floats =
      static_cast<size_t>(plan.grid_w / config_.merge_size * config_.merge_size *
                          config_.merge_size * row_length());
  float* dst = out.data();
  for (int64_t y = 0; y < plan.resized_height; y += band_rows) {
    const uint8_t* band =
        resizer.Rows(static_cast<int>(y), static_cast<int>(y + band_rows));
    WriteBlockRow(plan, band, dst, stream, scratch.row.data());
    dst += block_row_floats;
  }
  if (stream) StreamFence();
  return Status::OK();
}

}  // namespace stoker::vision
