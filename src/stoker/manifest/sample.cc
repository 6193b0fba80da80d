#include "stoker/manifest/sample.h"

#include <simdjson.h>

namespace stoker::manifest {

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

std::string Where(size_t message, int item = -1) {
  std::string out = "messages[" + std::to_string(message) + "]";
  if (item >= 0) out += ".content[" + std::to_string(item) + "]";
  return out;
}

bool IsKnownRole(std::string_view role) {
  return role == "user" || role == "assistant" || role == "system" || role == "tool";
}

Status ParseContentItem(element item, size_t m, int i, SampleRefs* out) {
  object obj;
  if (item.get_object().get(obj) != simdjson::SUCCESS) {
    return status::ManifestError(Where(m, i), ": content item is not an object");
  }
  std::string_view type;
  if (obj["type"].get_string().get(type) != simdjson::SUCCESS) {
    return status::ManifestError(Where(m, i), ": missing string field 'type'");
  }
  if (type == "text") {
    std::string_view text;
    if (obj["text"].get_string().get(text) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m, i), ": text item needs a string field 'text'");
    }
    return Status::OK();
  }
  if (type == "image") {
    for (const char* key : {"image", "path", "url"}) {
      element value;
      if (obj[key].get(value) != simdjson::SUCCESS) continue;
      std::string_view ref;
      if (value.get_string().get(ref) != simdjson::SUCCESS || ref.empty()) {
        return status::ManifestError(Where(m, i), ": image field '", key,
                                     "' must be a non-empty string");
      }
      out->images.emplace_back(ref);
      return Status::OK();
    }
    return status::ManifestError(Where(m, i),
                                 ": image item needs an 'image', 'path' or 'url' field");
  }
  return status::ManifestError(Where(m, i), ": unsupported content type '", type,
                               "' (expected 'text' or 'image')");
}

}  // namespace

struct SampleParser::Impl {
  simdjson::dom::parser parser;
};

SampleParser::SampleParser() : impl_(std::make_unique<Impl>()) {}
SampleParser::~SampleParser() = default;
SampleParser::SampleParser(SampleParser&&) noexcept = default;
SampleParser& SampleParser::operator=(SampleParser&&) noexcept = default;

Status SampleParser::Parse(std::string_view line, SampleRefs* out) {
  out->images.clear();
  out->num_messages = 0;
  element doc;
  // realloc_if_needed: simdjson needs padding past the end; it copies the line into
  // its own reused buffer when the mapping does not provide it.
  if (auto error = impl_->parser.parse(line.data(), line.size(), true).get(doc)) {
    return status::ManifestError("malformed JSON: ", simdjson::error_message(error));
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    return status::ManifestError("sample is not a JSON object");
  }
  array messages;
  element messages_value;
  if (root["messages"].get(messages_value) != simdjson::SUCCESS) {
    return status::ManifestError(
        "missing 'messages' field (expected {\"messages\": [{\"role\": ..., \"content\": "
        "...}, ...]})");
  }
  if (messages_value.get_array().get(messages) != simdjson::SUCCESS) {
    return status::ManifestError("'messages' is not a list");
  }
  size_t m = 0;
  for (element message : messages) {
    object msg;
    if (message.get_object().get(msg) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": message is not an object");
    }
    std::string_view role;
    if (msg["role"].get_string().get(role) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": missing string field 'role'");
    }
    if (!IsKnownRole(role)) {
      return status::ManifestError(Where(m), ": unknown role '", role,
                                   "' (expected system, user, assistant or tool)");
    }
    element content;
    if (msg["content"].get(content) != simdjson::SUCCESS) {
      return status::ManifestError(Where(m), ": missing field 'content'");
    }
    array items;
    if (content.get_array().get(items) == simdjson::SUCCESS) {
      int i = 0;
      for (element item : items) {
        STOKER_RETURN_NOT_OK(ParseContentItem(item, m, i++, out));
      }
    } else if (!content.is_string()) {
      return status::ManifestError(Where(m), ": 'content' must be a string or a list");
    }
    ++m;
  }
  if (m == 0) return status::ManifestError("'messages' is empty");
  out->num_messages = static_cast<int>(m);
  return Status::OK();
}

}  // namespace stoker::manifest
