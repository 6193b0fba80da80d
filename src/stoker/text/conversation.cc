#include "stoker/text/conversation.h"

#include <simdjson.h>

namespace stoker::text {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::string_view kLlavaImageTag = "<image>";
// Strings the processor would take for vision placeholders if a user wrote them.
constexpr std::string_view kReservedMarkers[] = {"<|image_pad|>", "<|video_pad|>",
                                                 "<|vision_start|>", "<|vision_end|>"};

std::string Where(size_t message, int item = -1) {
  std::string out = "messages[" + std::to_string(message) + "]";
  if (item >= 0) out += ".content[" + std::to_string(item) + "]";
  return out;
}

Status CheckText(std::string_view text, const std::string& where) {
  for (std::string_view marker : kReservedMarkers) {
    if (text.find(marker) != std::string_view::npos) {
      return status::ManifestError(where, ": text contains the literal vision marker '",
                                   marker, "' (images must be content items)");
    }
  }
  return Status::OK();
}

bool IsKnownRole(std::string_view role) {
  return role == "user" || role == "assistant" || role == "system" || role == "tool";
}

Status ParseItem(element item, size_t m, int i, Conversation* conv, Message* message) {
  object obj;
  if (item.get_object().get(obj) != simdjson::SUCCESS) {
    return status::ManifestError(Where(m, i), ": content item is not an object");
  }
  std::string_view type;
  const bool has_type = obj["type"].get_string().get(type) == simdjson::SUCCESS;
  ContentItem out;
  for (const char* key : {"image", "image_url", "path", "url"}) {
    element value;
    if (obj[key].get(value) != simdjson::SUCCESS) continue;
    if (has_type && type != "image" && type != "image_url") break;
    std::string_view ref;
    if (value.is_object() && std::string_view(key) == "image_url") {
      if (value["url"].get_string().get(ref)) {}
    } else {
      if (value.get_string().get(ref)) {}
    }
    if (ref.empty()) {
      return status::ManifestError(Where(m, i), ": image field '", key,
                                   "' must be a non-empty string");
    }
    out.kind = ContentItem::Kind::kImage;
    out.image = std::string(ref);
    conv->images.push_back(out.image);
    message->content.push_back(std::move(out));
    return Status::OK();
  }
  if (has_type && (type == "image" || type == "image_url")) {
    return status::ManifestError(Where(m, i),
                                 ": image item needs an 'image', 'path' or 'url' field");
  }
  if (has_type && type != "text") {
    return status::ManifestError(Where(m, i), ": unsupported content type '", type,
                                 "' (expected 'text' or 'image')");
  }
  element text_value;
  if (obj["text"].get(text_value) != simdjson::SUCCESS) {
    return status::ManifestError(Where(m, i), ": text item needs a field 'text'");
  }
  std::string_view text;
  if (text_value.get_string().get(text) != simdjson::SUCCESS) {
    return status::ManifestError(Where(m, i), ": 'text' must be a string");
  }
  STOKER_RETURN_NOT_OK(CheckText(text, Where(m, i)));
  out.text = std::string(text);
  message->content.push_back(std::move(out));
  return Status::OK();
}

Status ParseMessages(array messages, Conversation* conv) {
  if (messages.size() == 0) return status::ManifestError("messages: empty conversation");
  size_t m = 0;
  for (element msg : messages) {
    object obj;
    if (msg.get_object().get(obj) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": message is not an object");
    }
    std::string_view role;
    if (obj["role"].get_string().get(role) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": missing string field 'role'");
    }
    if (!IsKnownRole(role)) {
      return status::ManifestError(Where(m), ": unknown role '", role,
                                   "' (expected system, user, assistant or tool)");
    }
    Message message;
    message.role = std::string(role);
    element content;
    if (obj["content"].get(content) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": missing field 'content'");
    }
    std::string_view text;
    array items;
    if (content.get_string().get(text) == simdjson::SUCCESS) {
      STOKER_RETURN_NOT_OK(CheckText(text, Where(m)));
      message.string_content = true;
      message.content.push_back({ContentItem::Kind::kText, std::string(text), {}});
    } else if (content.get_array().get(items) == simdjson::SUCCESS) {
      int i = 0;
      for (element item : items) STOKER_RETURN_NOT_OK(ParseItem(item, m, i++, conv, &message));
    } else {
      return status::ManifestError(Where(m), ": 'content' must be a string or a list");
    }
    conv->messages.push_back(std::move(message));
    ++m;
  }
  return Status::OK();
}

Status ParseLlava(object root, array turns, Conversation* conv) {
  if (turns.size() == 0) return status::ManifestError("conversations: empty conversation");
  std::vector<std::string> images;
  element image;
  if (root["image"].get(image) == simdjson::SUCCESS) {
    std::string_view ref;
    array list;
    if (image.get_string().get(ref) == simdjson::SUCCESS) {
      images.emplace_back(ref);
    } else if (image.get_array().get(list) == simdjson::SUCCESS) {
      for (element e : list) {
        if (e.get_string().get(ref) != simdjson::SUCCESS) {
          return status::ManifestError("image: every entry must be a string");
        }
        images.emplace_back(ref);
      }
    } else {
      return status::ManifestError("image: must be a string or a list of strings");
    }
  }
  size_t used = 0;
  size_t t = 0;
  for (element turn : turns) {
    const std::string where = "conversations[" + std::to_string(t) + "]";
    object obj;
    std::string_view from, value;
    if (turn.get_object().get(obj) != simdjson::SUCCESS) {
      return status::ManifestError(where, ": turn is not an object");
    }
    if (obj["from"].get_string().get(from) != simdjson::SUCCESS) {
      return status::ManifestError(where, ": missing string field 'from'");
    }
    if (obj["value"].get_string().get(value) != simdjson::SUCCESS) {
      return status::ManifestError(where, ": 'value' must be a string");
    }
    Message message;
    if (from == "human" || from == "user") message.role = "user";
    else if (from == "gpt" || from == "assistant") message.role = "assistant";
    else if (from == "system") message.role = "system";
    else return status::ManifestError(where, ": unknown speaker '", from,
                                      "' (expected human, gpt or system)");
    STOKER_RETURN_NOT_OK(CheckText(value, where));
    size_t pos = 0;
    while (true) {
      const size_t tag = value.find(kLlavaImageTag, pos);
      const std::string_view before =
          value.substr(pos, tag == std::string_view::npos ? std::string_view::npos : tag - pos);
      if (!before.empty()) message.content.push_back({ContentItem::Kind::kText, std::string(before), {}});
      if (tag == std::string_view::npos) break;
      if (used == images.size()) {
        return status::ManifestError(where, ": more <image> tags than images (",
                                     std::to_string(images.size()), ")");
      }
      message.content.push_back({ContentItem::Kind::kImage, {}, images[used]});
      conv->images.push_back(images[used]);
      ++used;
      pos = tag + kLlavaImageTag.size();
    }
    if (message.content.empty()) message.content.push_back({ContentItem::Kind::kText, {}, {}});
    conv->messages.push_back(std::move(message));
    ++t;
  }
  if (used != images.size()) {
    return status::ManifestError("conversations: ", std::to_string(used),
                                 " <image> tags for ", std::to_string(images.size()), " images");
  }
  return Status::OK();
}

}  // namespace

struct ConversationParser::Impl {
  simdjson::dom::parser parser;  // keeps its buffers from line to line
};

ConversationParser::ConversationParser() : impl_(std::make_unique<Impl>()) {}
ConversationParser::~ConversationParser() = default;
ConversationParser::ConversationParser(ConversationParser&&) noexcept = default;
ConversationParser& ConversationParser::operator=(ConversationParser&&) noexcept = default;

Status ConversationParser::Parse(std::string_view json, Conversation* out) {
  out->messages.clear();
  out->images.clear();
  element doc;
  if (auto error = impl_->parser.parse(json.data(), json.size(), true).get(doc)) {
    return status::ManifestError("malformed JSON: ", simdjson::error_message(error));
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    return status::ManifestError("sample is not a JSON object");
  }
  array list;
  if (root["messages"].get_array().get(list) == simdjson::SUCCESS) {
    return ParseMessages(list, out);
  }
  if (root["conversations"].get_array().get(list) == simdjson::SUCCESS) {
    return ParseLlava(root, list, out);
  }
  return status::ManifestError(
      "sample has neither a 'messages' list nor a LLaVA 'conversations' list");
}

Result<Conversation> ParseConversation(std::string_view json) {
  ConversationParser parser;
  Conversation conv;
  STOKER_RETURN_NOT_OK(parser.Parse(json, &conv));
  return conv;
}

}  // namespace stoker::text
