#include "stoker/text/chat_template.h"

namespace stoker::text {

namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kVisionStart = "<|vision_start|>";
constexpr std::string_view kVisionEnd = "<|vision_end|>";
constexpr std::string_view kImagePad = "<|image_pad|>";
constexpr std::string_view kEmptyThink = "<think>\n\n</think>\n\n";

class Renderer {
 public:
  Renderer(const std::vector<ImageGrid>& grids, const TemplateOptions& options)
      : grids_(grids), options_(options) {}

  void Add(RenderedChunk::Part part, int message, std::string_view text) {
    if (text.empty()) return;
    if (!out_.chunks.empty() && out_.chunks.back().part == part &&
        out_.chunks.back().message == message) {
      out_.chunks.back().text.append(text);
      return;
    }
    out_.chunks.push_back({part, message, std::string(text)});
  }

  Status Image(int message) {
    if (static_cast<size_t>(out_.num_images) >= grids_.size()) {
      return status::InvalidArgument("the conversation has more images than the ",
                                     std::to_string(grids_.size()), " image grids given");
    }
    const int64_t count = VisualTokenCount(grids_[out_.num_images]);
    ++out_.num_images;
    if (options_.add_vision_id) {
      Add(RenderedChunk::Part::kStructure, message,
          "Picture " + std::to_string(out_.num_images) + ": ");
    }
    std::string text(kVisionStart);
    text.reserve(text.size() + count * kImagePad.size() + kVisionEnd.size());
    for (int64_t k = 0; k < count; ++k) text.append(kImagePad);
    text.append(kVisionEnd);
    out_.chunks.push_back({RenderedChunk::Part::kImage, message, std::move(text)});
    return Status::OK();
  }

  // Content items of message m: text in `text_part`, images expanded (or, when
  // `text_only`, images refused).
  Status Content(const Message& msg, int m, RenderedChunk::Part text_part, bool text_only) {
    for (const ContentItem& item : msg.content) {
      if (item.kind == ContentItem::Kind::kText) {
        Add(text_part, m, item.text);
      } else if (text_only) {
        return status::InvalidArgument("messages[", std::to_string(m),
                                       "]: this template drops images in '", msg.role,
                                       "' messages; move the image to a user message");
      } else {
        STOKER_RETURN_NOT_OK(Image(m));
      }
    }
    return Status::OK();
  }

  Status AssistantTurn(const Message& msg, int m, bool text_only, bool empty_think) {
    Add(RenderedChunk::Part::kStructure, m, std::string(kImStart) + "assistant\n");
    if (empty_think) {
      bool has_think = false;
      for (const ContentItem& item : msg.content) {
        if (item.kind == ContentItem::Kind::kText &&
            (item.text.find("<think>") != std::string::npos ||
             item.text.find("</think>") != std::string::npos)) {
          has_think = true;
        }
      }
      if (!has_think) Add(RenderedChunk::Part::kAssistantContent, m, kEmptyThink);
    }
    STOKER_RETURN_NOT_OK(Content(msg, m, RenderedChunk::Part::kAssistantContent, text_only));
    Add(RenderedChunk::Part::kAssistantEnd, m, kImEnd);
    Add(RenderedChunk::Part::kAssistantNewline, m, "\n");
    return Status::OK();
  }

  RenderedChat Take() { return std::move(out_); }
  int num_images() const { return out_.num_images; }

 private:
  const std::vector<ImageGrid>& grids_;
  const TemplateOptions& options_;
  RenderedChat out_;
};

Status RenderQwen2(const Conversation& conv, const TemplateOptions& options, Renderer* r) {
  using Part = RenderedChunk::Part;
  if (conv.messages.front().role != "system") {
    r->Add(Part::kStructure, -1,
           std::string(kImStart) + "system\n" + std::string(kQwen2DefaultSystem) +
               std::string(kImEnd) + "\n");
  }
  for (size_t i = 0; i < conv.messages.size(); ++i) {
    const Message& msg = conv.messages[i];
    const int m = static_cast<int>(i);
    if (msg.role == "assistant") {
      STOKER_RETURN_NOT_OK(r->AssistantTurn(msg, m, false, false));
      continue;
    }
    r->Add(Part::kStructure, m, std::string(kImStart) + msg.role + "\n");
    STOKER_RETURN_NOT_OK(r->Content(msg, m, Part::kStructure, false));
    r->Add(Part::kStructure, m, std::string(kImEnd) + "\n");
  }
  return Status::OK();
}

Status RenderQwen3(const Conversation& conv, const TemplateOptions& options, Renderer* r) {
  using Part = RenderedChunk::Part;
  size_t first = 0;
  if (conv.messages.front().role == "system") {
    const Message& system = conv.messages.front();
    r->Add(Part::kStructure, 0, std::string(kImStart) + "system\n");
    // A system message contributes only its text.
    for (const ContentItem& item : system.content) {
      if (item.kind == ContentItem::Kind::kText) {
        r->Add(Part::kStructure, 0, item.text);
      } else {
        return status::InvalidArgument(
            "messages[0]: the qwen3-vl template drops images in the system message");
      }
    }
    r->Add(Part::kStructure, 0, std::string(kImEnd) + "\n");
    first = 1;
  }
  for (size_t i = first; i < conv.messages.size(); ++i) {
    const Message& msg = conv.messages[i];
    const int m = static_cast<int>(i);
    if (msg.role == "assistant") {
      STOKER_RETURN_NOT_OK(r->AssistantTurn(msg, m, true, options.qwen3_empty_think));
    } else if (msg.role == "tool") {
      // A run of tool messages is one user turn of <tool_response> blocks.
      const bool run_start = i == first || conv.messages[i - 1].role != "tool";
      const bool run_end = i + 1 == conv.messages.size() || conv.messages[i + 1].role != "tool";
      if (run_start) r->Add(Part::kStructure, m, std::string(kImStart) + "user");
      r->Add(Part::kStructure, m, "\n<tool_response>\n");
      STOKER_RETURN_NOT_OK(r->Content(msg, m, Part::kStructure, false));
      r->Add(Part::kStructure, m, "\n</tool_response>");
      if (run_end) r->Add(Part::kStructure, m, std::string(kImEnd) + "\n");
    } else if (msg.role == "system") {
      return status::InvalidArgument("messages[", std::to_string(i),
                                     "]: qwen3-vl takes a system message only first");
    } else {
      r->Add(Part::kStructure, m, std::string(kImStart) + msg.role + "\n");
      STOKER_RETURN_NOT_OK(r->Content(msg, m, Part::kStructure, false));
      r->Add(Part::kStructure, m, std::string(kImEnd) + "\n");
    }
  }
  return Status::OK();
}

}  // namespace

Result<ModelFamily> ParseModelFamily(std::string_view name) {
  std::string key;
  for (char c : name) {
    if (c != '-' && c != '_') key.push_back(static_cast<char>(std::tolower(c)));
  }
  if (key == "qwen2vl") return ModelFamily::kQwen2VL;
  if (key == "qwen2.5vl" || key == "qwen25vl") return ModelFamily::kQwen25VL;
  if (key == "qwen3vl") return ModelFamily::kQwen3VL;
  return status::InvalidArgument("unknown model '", name,
                                 "' (expected qwen2-vl, qwen2.5-vl or qwen3-vl)");
}

int64_t VisualTokenCount(const ImageGrid& grid, int64_t merge_size) {
  return grid[0] * grid[1] * grid[2] / (merge_size * merge_size);
}

Result<RenderedChat> RenderChat(const Conversation& conv, ModelFamily family,
                                const std::vector<ImageGrid>& grids,
                                const TemplateOptions& options) {
  if (conv.messages.empty()) return status::InvalidArgument("empty conversation");
  for (const ImageGrid& g : grids) {
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0 || g[1] % kSpatialMergeSize != 0 ||
        g[2] % kSpatialMergeSize != 0) {
      return status::InvalidArgument("image grid (", std::to_string(g[0]), ", ",
                                     std::to_string(g[1]), ", ", std::to_string(g[2]),
                                     ") is not positive with h and w multiples of 2");
    }
  }
  Renderer r(grids, options);
  if (family == ModelFamily::kQwen3VL) {
    STOKER_RETURN_NOT_OK(RenderQwen3(conv, options, &r));
  } else {
    STOKER_RETURN_NOT_OK(RenderQwen2(conv, options, &r));
  }
  if (static_cast<size_t>(r.num_images()) != grids.size()) {
    return status::InvalidArgument("the conversation has ", std::to_string(r.num_images()),
                                   " images but ", std::to_string(grids.size()),
                                   " image grids were given");
  }
  if (options.add_generation_prompt) {
    r.Add(RenderedChunk::Part::kStructure, -1, std::string(kImStart) + "assistant\n");
  }
  return r.Take();
}

std::string JoinChunks(const RenderedChat& chat) {
  std::string out;
  for (const RenderedChunk& c : chat.chunks) out += c.text;
  return out;
}

}  // namespace stoker::text
