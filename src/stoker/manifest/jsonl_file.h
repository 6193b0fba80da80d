// JsonlFile: a JSONL manifest mapped into memory, with an index of its sample lines.
//
// Blank (whitespace-only) lines are not samples but keep their line numbers, so a
// sample's key "<manifest>:<line>" is what an editor shows. The manifest is mapped
// read-only; lines are views into the mapping, valid while the JsonlFile lives.
// Immutable after Open(), so any number of threads may read it.
//
// The index (see line_index.h) is built in two streaming passes at memory speed and,
// when a cache directory is given, persisted there and memory-mapped on later opens
// while the manifest's size and modification time are unchanged. Either way it costs
// 12 bytes per sample of page cache, not heap: a 10^8-line manifest is plannable
// without gigabytes of RAM.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "stoker/core/status.h"
#include "stoker/manifest/line_index.h"

namespace stoker::manifest {

struct LineRef {
  std::string_view text;  // without the newline (and without a trailing '\r')
  int64_t line_number;    // 1-based
};

struct OpenOptions {
  // Where indexes persist between runs; empty: build in memory each time.
  std::string index_cache_dir;
};

class JsonlFile {
 public:
  // Errors: NotFound, IOError; ManifestError if the file holds no sample line.
  // `display_path` (default: `path`) names the file in sample keys and messages: the
  // URI of a manifest staged from an object store into a local copy.
  static Result<std::shared_ptr<JsonlFile>> Open(const std::string& path,
                                                 const OpenOptions& options = {},
                                                 const std::string& display_path = {});
  ~JsonlFile();

  JsonlFile(const JsonlFile&) = delete;
  JsonlFile& operator=(const JsonlFile&) = delete;

  int64_t num_samples() const { return index_->num_samples(); }
  // Precondition: 0 <= index < num_samples().
  LineRef Sample(int64_t index) const;
  // "<path>:<line>", the key that names a sample in batches, stats and errors.
  std::string SampleKey(int64_t index) const;

  const std::string& path() const { return path_; }
  const std::string& display_path() const { return display_path_; }
  int64_t size_bytes() const { return static_cast<int64_t>(size_); }
  // True when the index came from the cache rather than a scan of the manifest.
  bool index_from_cache() const { return index_from_cache_; }

 private:
  JsonlFile() = default;

  std::string path_;
  std::string display_path_;
  const char* data_ = nullptr;  // the mapping (nullptr for an empty file)
  size_t size_ = 0;
  std::unique_ptr<LineIndex> index_;
  bool index_from_cache_ = false;
};

}  // namespace stoker::manifest
