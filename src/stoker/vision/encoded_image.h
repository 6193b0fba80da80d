// The image processor fed with encoded bytes (JPEG / PNG / WebP): header -> plan, then
// decode -> optional alpha compositing and EXIF transpose -> ImageProcessor::Run.
//
// Same two phases as ImageProcessor: PlanEncodedImage reads the header only (so the
// pixel limit, zero sizes and the aspect ratio are refused before any pixel memory
// exists, and visual token counts cost no decode); RunEncodedImage decodes into the
// thread's scratch and writes rows into caller memory. Thread-safe with one scratch per
// thread.
#pragma once

#include <cstdint>
#include <span>

#include "stoker/core/status.h"
#include "stoker/vision/image_processor.h"

namespace stoker::vision {

struct EncodedImageOptions {
  // Apply the JPEG's EXIF orientation like PIL.ImageOps.exif_transpose (Hugging Face's
  // load_image does this for paths and URLs; images passed as PIL objects are not
  // transposed).
  bool exif_transpose = false;
  // qwen-vl-utils' to_rgb: RGBA images are pasted onto a white canvas instead of
  // dropping alpha. Other modes (LA, P with transparency) are converted as Pillow's
  // convert("RGB") does, as qwen-vl-utils does.
  bool alpha_to_white = false;
};

// Errors: those of codec::ProbeImage (CorruptImage, UnsupportedImage) and of
// ImageProcessor::Plan (LimitExceeded, InvalidArgument).
Result<ImagePlan> PlanEncodedImage(const ImageProcessor& processor,
                                   std::span<const uint8_t> data,
                                   const EncodedImageOptions& options);

// `plan` from PlanEncodedImage for the same data and options. Errors: CorruptImage and
// UnsupportedImage from decoding, InvalidArgument for a wrong `out` size.
Status RunEncodedImage(const ImageProcessor& processor, const ImagePlan& plan,
                       std::span<const uint8_t> data, const EncodedImageOptions& options,
                       std::span<float> out, VisionScratch& scratch);

// Pillow's paste of an RGBA image onto opaque white with its alpha as mask
// (Paste.c, BLEND): v = 255 * (255 - a) + c * a; out = ((v + 128) + ((v + 128) >> 8)) >> 8.
void CompositeOnWhite(const uint8_t* rgba, size_t pixels, uint8_t* rgb);

}  // namespace stoker::vision
