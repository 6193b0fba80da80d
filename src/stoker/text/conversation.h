// A training sample as the text stage sees it: a conversation of role-tagged messages
// whose content is text and images, parsed from one manifest line.
//
// Accepted schemas (anything else is a ManifestError naming the field and the fault):
//  * messages:  {"messages": [{"role": "system"|"user"|"assistant"|"tool",
//                              "content": "text" | [{"type": "text", "text": "..."},
//                                                   {"type": "image", "image": "a.jpg"}, ...]}]}
//    An image item may name its file under "image", "image_url", "path" or "url" (a
//    string, or {"url": "..."} for image_url); the "type" key may be left out when one
//    of those keys is present.
//  * LLaVA / ShareGPT: {"image": "a.jpg" | ["a.jpg", ...],
//                       "conversations": [{"from": "human"|"gpt"|"system", "value": "<image>\n..."}]}
//    Each "<image>" in a value becomes an image item at that place, in order; the
//    number of "<image>" tags must equal the number of images.
// Literal "<|image_pad|>" / "<|video_pad|>" / "<|vision_start|>" in user-written text
// is refused: the processor would treat it as an image placeholder.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::text {

struct ContentItem {
  enum class Kind { kText, kImage } kind = Kind::kText;
  std::string text;   // kText
  std::string image;  // kImage: the reference (path or URI) as written
};

struct Message {
  std::string role;  // system, user, assistant, tool
  // true when "content" was a plain string (held as one text item).
  bool string_content = false;
  std::vector<ContentItem> content;
};

struct Conversation {
  std::vector<Message> messages;
  // The image references in order of appearance.
  std::vector<std::string> images;
};

// Parses one JSON object (a manifest line).
Result<Conversation> ParseConversation(std::string_view json);

// The same with reused buffers: one per thread (not thread-safe), for the loader's
// workers, which parse line after line.
class ConversationParser {
 public:
  ConversationParser();
  ~ConversationParser();
  ConversationParser(ConversationParser&&) noexcept;
  ConversationParser& operator=(ConversationParser&&) noexcept;

  // Fills `out` (cleared first). Errors: ManifestError naming the field and the fault.
  Status Parse(std::string_view json, Conversation* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // keeps simdjson out of this header
};

}  // namespace stoker::text
