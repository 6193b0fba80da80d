// The sample schema: what a manifest line must look like, and the images it names.
//
// Accepted now: the messages format
//   {"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"},
//                                              {"type": "text", "text": "..."}]}, ...]}
// where content may also be a plain string, and an image item may name its file under
// "image", "path" or "url". Roles: system, user, assistant, tool.
//
// SampleParser is per-thread scratch (it owns simdjson's buffers, reused line after
// line); it is not thread-safe, keep one per worker.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::manifest {

struct SampleRefs {
  std::vector<std::string> images;  // in order of appearance, as written in the line
  int num_messages = 0;
};

class SampleParser {
 public:
  SampleParser();
  ~SampleParser();
  SampleParser(SampleParser&&) noexcept;
  SampleParser& operator=(SampleParser&&) noexcept;

  // Validates `line` and fills `out` (cleared first). Errors: ManifestError with the
  // JSON path of the offending field, e.g. "messages[1].content[0]: unknown type 'video'".
  Status Parse(std::string_view line, SampleRefs* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // keeps simdjson out of this header
};

}  // namespace stoker::manifest
