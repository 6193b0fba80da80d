// Qwen-VL chat templates, rendered natively (no Jinja): the strings the official
// templates give under transformers' settings (trim_blocks, lstrip_blocks), with each
// image's placeholder already expanded to its visual token count.
//
// The output is a list of chunks whose concatenation is the expanded text; each chunk
// says which message it comes from and what part of the turn it is, which is what the
// label rule needs (spans are computed on the expanded text, not on the unexpanded
// prompt: see the spec's note on transformers' broken assistant masks).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/text/conversation.h"

namespace stoker::text {

enum class ModelFamily { kQwen2VL, kQwen25VL, kQwen3VL };

// "qwen2-vl", "qwen2.5-vl", "qwen3-vl" (also with '_' or without '-').
Result<ModelFamily> ParseModelFamily(std::string_view name);

// The Qwen2-VL default system prompt (Qwen2-VL and Qwen2.5-VL templates only).
inline constexpr std::string_view kQwen2DefaultSystem = "You are a helpful assistant.";
// Qwen-VL merges 2x2 patches into one visual token (vision_config.spatial_merge_size).
inline constexpr int64_t kSpatialMergeSize = 2;

// An image's patch grid (t, h, w), as image_grid_thw.
using ImageGrid = std::array<int64_t, 3>;

// Visual tokens of one image: t*h*w / merge_size^2 (the processor's integer division).
int64_t VisualTokenCount(const ImageGrid& grid, int64_t merge_size = kSpatialMergeSize);

struct TemplateOptions {
  bool add_vision_id = false;         // "Picture k: " before each image
  bool add_generation_prompt = false;
  // Qwen3-VL, LLaMA-Factory's qwen3_vl template: an assistant message without <think>
  // or </think> gets "<think>\n\n</think>\n\n" in front of its content (trained).
  bool qwen3_empty_think = false;
};

struct RenderedChunk {
  enum class Part {
    kStructure,        // <|im_start|>role\n, system prompts, user/tool text, markers
    kAssistantContent, // what the assistant wrote (and an injected empty think block)
    kAssistantEnd,     // the <|im_end|> closing an assistant turn
    kAssistantNewline, // the "\n" after it
    kImage,            // vision start, pads, vision end of one image
  };
  Part part = Part::kStructure;
  int message = -1;  // index in Conversation::messages; -1 for the default system / prompt
  std::string text;
};

struct RenderedChat {
  std::vector<RenderedChunk> chunks;
  int num_images = 0;
};

// Renders `conv` for `family`. `grids` gives each image's grid in order of appearance
// (one per image of the conversation). Errors: InvalidArgument when the number of
// grids differs from the number of images, or when Qwen3-VL would drop an image (its
// template ignores images in assistant messages).
Result<RenderedChat> RenderChat(const Conversation& conv, ModelFamily family,
                                const std::vector<ImageGrid>& grids,
                                const TemplateOptions& options);

// The concatenated text.
std::string JoinChunks(const RenderedChat& chat);

}  // namespace stoker::text
