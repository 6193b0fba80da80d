// JsonlFile: a JSONL manifest mapped into memory, with the offset of every sample line.
//
// Blank (whitespace-only) lines are not samples but keep their line numbers, so a
// sample's key "<manifest>:<line>" is what an editor shows. The file is mapped
// read-only; lines are views into the mapping, valid while the JsonlFile lives.
// Immutable after Open(), so any number of threads may read it.
//
// The index is held in memory (12 bytes a line); the persisted, memory-mapped index
// for manifests of 10^8 lines belongs to the plan stage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::manifest {

struct LineRef {
  std::string_view text;  // without the newline (and without a trailing '\r')
  int64_t line_number;    // 1-based
};

class JsonlFile {
 public:
  // Errors: NotFound, IOError; ManifestError if the file holds no sample line.
  static Result<std::shared_ptr<JsonlFile>> Open(const std::string& path);
  ~JsonlFile();

  JsonlFile(const JsonlFile&) = delete;
  JsonlFile& operator=(const JsonlFile&) = delete;

  int64_t num_samples() const { return static_cast<int64_t>(starts_.size()); }
  // Precondition: 0 <= index < num_samples().
  LineRef Sample(int64_t index) const;
  // "<path>:<line>", the key that names a sample in batches, stats and errors.
  std::string SampleKey(int64_t index) const;

  const std::string& path() const { return path_; }
  int64_t size_bytes() const { return static_cast<int64_t>(size_); }

 private:
  JsonlFile() = default;

  std::string path_;
  const char* data_ = nullptr;  // the mapping (nullptr for an empty file)
  size_t size_ = 0;
  std::vector<uint64_t> starts_;        // byte offset of each sample line
  std::vector<uint32_t> lengths_;       // its length without the line ending
  std::vector<int64_t> line_numbers_;   // its 1-based line number
};

}  // namespace stoker::manifest
