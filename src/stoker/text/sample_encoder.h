// The text half of one training sample: conversation -> chat template with expanded
// image placeholders -> token ids -> labels -> mRoPE position ids.
//
// Label rule (spec §13.6, the de-facto convention of LLaMA-Factory / ms-swift): in
// LabelMode::kAssistant a token is trained (label = its id) when its first character
// lies in an assistant turn's content, or it is the turn's closing <|im_end|> or the
// "\n" after it; every other token (system, user, tool, the "<|im_start|>assistant\n"
// header, vision markers, image pads) gets -100. Spans are computed on the expanded
// text. A token the tokenizer forms across the header/content boundary (content that
// starts with "\n" merges with the header's "\n") starts in the header, so it is masked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/text/chat_template.h"
#include "stoker/text/conversation.h"
#include "stoker/text/rope.h"
#include "stoker/text/tokenizer.h"

namespace stoker::text {

inline constexpr int64_t kIgnoreIndex = -100;  // labels of masked tokens (PyTorch's default)

enum class LabelMode {
  kAssistant,      // every assistant turn (default)
  kLastAssistant,  // only the last assistant turn (LLaMA-Factory mask_history)
  kAll,            // every token (TRL's conversational VLM collator, train_on_prompt)
};

Result<LabelMode> ParseLabelMode(std::string_view name);

struct SampleEncodeOptions {
  ModelFamily family = ModelFamily::kQwen2VL;
  TemplateOptions chat;
  LabelMode label_mode = LabelMode::kAssistant;
  bool train_trailing_newline = true;  // the "\n" after an assistant's <|im_end|>
  // > 0: keep at most this many tokens. A cut that would fall inside an image's
  // placeholder run ends the sample before that image instead; the image and any
  // after it are dropped (EncodedSample::num_images says how many remain).
  int64_t max_length = 0;
};

struct EncodedSample {
  std::string text;  // the rendered, expanded text
  std::vector<int64_t> input_ids;
  std::vector<int64_t> labels;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> position_ids;  // [3][L], row-major
  int64_t rope_delta = 0;
  int64_t num_images = 0;  // leading images whose tokens are in input_ids
  bool truncated = false;  // max_length shortened the sample
};

// Encodes one conversation whose images have the given grids (one per image, in order).
// Errors: InvalidArgument for grid/image mismatches and template limits.
Result<EncodedSample> EncodeSample(const Tokenizer& tokenizer, TokenizerSession* session,
                                   const Conversation& conv,
                                   const std::vector<ImageGrid>& grids,
                                   const SampleEncodeOptions& options);

}  // namespace stoker::text
