// SampleProcessor: one manifest line -> the model inputs of one training sample, in the
// two phases the pipeline schedules separately so pixels are written exactly once,
// straight into the batch's pixel_values tensor:
//
//   Prepare (phase 1, per sample)       parse the conversation, read each image's bytes,
//                                       plan it from its header alone (limits checked,
//                                       grid known, nothing decoded), render the chat
//                                       template with the visual token counts, tokenize,
//                                       label, mRoPE ids; apply max_length.
//   -- the batch's pixel_values is sized from the plans of all its samples --
//   WritePixels (phase 2, per sample)   decode, resize, normalise and patchify every kept
//                                       image into the sample's rows of that tensor.
//
// A SampleProcessor is immutable and shared by every worker; each worker passes its own
// SampleScratch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/io/body.h"
#include "stoker/text/sample_encoder.h"
#include "stoker/text/tokenizer.h"
#include "stoker/vision/encoded_image.h"
#include "stoker/vision/image_processor.h"

namespace stoker::io {
class ObjectStore;
}

namespace stoker::pipeline {

class Metrics;
class ImageReads;

// Reads the image a manifest names as `ref` into `out`: `ref` joined onto `image_root`
// unless absolute, read through `store` when the loader has one (local paths, s3://,
// http(s)://, under the store's URI policy), else from the local file system, where a
// URI is refused with a message saying how to read it. Errors start with the
// reference: "image 'a.jpg': ...". Image `index` of the sample is taken from `ahead`
// when it was read ahead (see read_ahead.h).
Status ReadImage(const std::string& image_root, const std::string& ref,
                 io::ObjectStore* store, io::Body* out, ImageReads* ahead = nullptr,
                 size_t index = 0);

// What to do with a sample longer than max_length tokens.
enum class OverlongPolicy : uint8_t {
  kTruncate,  // keep max_length tokens, never splitting an image's placeholder run
  kDrop,      // replace the sample by the plan's substitute for its slot
};

struct ModelInputOptions {
  std::shared_ptr<const text::Tokenizer> tokenizer;
  vision::ProcessorConfig vision;
  vision::EncodedImageOptions image;
  // Template, label mode and max_length (0: no limit). The chat family must be the
  // vision config's family.
  text::SampleEncodeOptions text;
  OverlongPolicy overlong = OverlongPolicy::kTruncate;
  int64_t pad_id = 0;  // input_ids of padding
};

// Phase 1's result, kept until the sample's pixels are written.
struct PreparedSample {
  std::vector<io::Body> image_bytes;              // encoded, one per kept image
  std::vector<std::string> image_refs;            // as written in the manifest
  std::vector<vision::ImagePlan> plans;           // one per kept image
  text::EncodedSample text;
  bool dropped = false;  // over max_length under OverlongPolicy::kDrop

  int64_t num_patches() const;
  void Clear();
};

struct SampleScratch {
  SampleScratch();
  ~SampleScratch();
  SampleScratch(SampleScratch&&) noexcept;
  text::ConversationParser parser;
  text::Conversation conversation;
  std::vector<text::ImageGrid> grids;
  std::unique_ptr<text::TokenizerSession> session;
  vision::VisionScratch vision;
};

class SampleProcessor {
 public:
  // Errors: InvalidArgument (no tokenizer, a bad vision config).
  static Result<std::shared_ptr<const SampleProcessor>> Make(ModelInputOptions options);

  // Phase 1. Images are read with ReadImage(image_root, ref, store). `metrics` (may be
  // null) receives the parse, read, probe and text stage timings. Errors name the
  // image and the cause: ManifestError, NotFound / IOError, CorruptImage /
  // UnsupportedImage (header), LimitExceeded (pixel limit), InvalidArgument (aspect
  // ratio, zero size, template limits).
  Status Prepare(std::string_view line, const std::string& image_root, io::ObjectStore* store,
                 PreparedSample* out, SampleScratch* scratch, Metrics* metrics,
                 ImageReads* ahead = nullptr) const;

  // Phase 2: writes sample.num_patches() * row_length() floats into `out`. Errors:
  // CorruptImage / UnsupportedImage from decoding, naming the image.
  Status WritePixels(const PreparedSample& sample, std::span<float> out,
                     SampleScratch* scratch, Metrics* metrics) const;

  int64_t row_length() const { return processor_.row_length(); }
  const ModelInputOptions& options() const { return options_; }

 private:
  SampleProcessor(ModelInputOptions options, vision::ImageProcessor processor,
                  text::SampleEncodeOptions encode)
      : options_(std::move(options)),
        processor_(std::move(processor)),
        encode_options_(std::move(encode)) {}

  ModelInputOptions options_;
  vision::ImageProcessor processor_;
  text::SampleEncodeOptions encode_options_;  // what Prepare passes to EncodeSample
};

}  // namespace stoker::pipeline
