#include "stoker/text/sample_encoder.h"

#include <algorithm>

namespace stoker::text {

Result<LabelMode> ParseLabelMode(std::string_view name) {
  if (name == "assistant") return LabelMode::kAssistant;
  if (name == "last_assistant") return LabelMode::kLastAssistant;
  if (name == "all") return LabelMode::kAll;
  return status::InvalidArgument("unknown label_mode '", name,
                                 "' (expected assistant, last_assistant or all)");
}

Result<EncodedSample> EncodeSample(const Tokenizer& tokenizer, TokenizerSession* session,
                                   const Conversation& conv,
                                   const std::vector<ImageGrid>& grids,
                                   const SampleEncodeOptions& options) {
  STOKER_ASSIGN_OR_RETURN(RenderedChat chat,
                          RenderChat(conv, options.family, grids, options.chat));
  EncodedSample out;
  // Temporaries in the session's buffers: no allocation once they have grown.
  TokenizerSession::CallerScratch& scratch = session->caller_scratch();
  std::vector<uint32_t>& boundaries = scratch.boundaries;  // every chunk's start but the first
  boundaries.clear();
  size_t text_bytes = 0;
  for (const RenderedChunk& chunk : chat.chunks) text_bytes += chunk.text.size();
  out.text.reserve(text_bytes);
  for (const RenderedChunk& chunk : chat.chunks) {
    if (!out.text.empty()) boundaries.push_back(static_cast<uint32_t>(out.text.size()));
    out.text += chunk.text;
  }
  std::vector<int32_t>& ids = scratch.ids;
  std::vector<uint32_t>& regions = scratch.regions;
  ids.clear();
  regions.clear();
  STOKER_RETURN_NOT_OK(tokenizer.Encode(out.text, boundaries, session, &ids, &regions));

  int last_assistant = -1;
  for (size_t m = 0; m < conv.messages.size(); ++m) {
    if (conv.messages[m].role == "assistant") last_assistant = static_cast<int>(m);
  }
  size_t n = ids.size();
  out.num_images = static_cast<int64_t>(grids.size());
  if (options.max_length > 0 && n > static_cast<size_t>(options.max_length)) {
    size_t cut = static_cast<size_t>(options.max_length);
    // Never split an image's <|vision_start|> pads <|vision_end|> run: a cut inside it
    // moves back to the run's first token, so the image is dropped whole (the model
    // could not match a partial run to its pixels).
    while (cut > 0 && regions[cut] == regions[cut - 1] &&
           chat.chunks[regions[cut]].part == RenderedChunk::Part::kImage) {
      --cut;
    }
    // Images whose run lies wholly before the cut survive; runs are in image order.
    int64_t kept = 0;
    for (uint32_t c = 0; c < chat.chunks.size() && c < (cut > 0 ? regions[cut - 1] + 1 : 0);
         ++c) {
      if (chat.chunks[c].part == RenderedChunk::Part::kImage) ++kept;
    }
    out.num_images = kept;
    out.truncated = true;
    n = cut;
  }
  out.input_ids.resize(n);
  out.labels.resize(n);
  out.attention_mask.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    out.input_ids[i] = ids[i];
    const RenderedChunk& chunk = chat.chunks[regions[i]];
    bool trained = false;
    switch (options.label_mode) {
      case LabelMode::kAll:
        trained = true;
        break;
      case LabelMode::kAssistant:
      case LabelMode::kLastAssistant: {
        using Part = RenderedChunk::Part;
        trained = chunk.part == Part::kAssistantContent || chunk.part == Part::kAssistantEnd ||
                  (chunk.part == Part::kAssistantNewline && options.train_trailing_newline);
        if (options.label_mode == LabelMode::kLastAssistant && chunk.message != last_assistant) {
          trained = false;
        }
        break;
      }
    }
    out.labels[i] = trained ? ids[i] : kIgnoreIndex;
  }
  // Images whose tokens survived truncation.
  std::vector<ImageGrid> kept(grids.begin(), grids.begin() + out.num_images);
  STOKER_RETURN_NOT_OK(
      MRopePositions(out.input_ids, kept, RopeIds{}, &out.position_ids, &out.rope_delta));
  return out;
}

}  // namespace stoker::text
