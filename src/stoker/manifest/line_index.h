// LineIndex: where each sample line of a JSONL manifest starts, how long it is, and
// its line number — one versioned, checksummed byte layout, whether it lives in memory
// or in a memory-mapped cache file:
//
//   Header (64 bytes, little-endian)
//   uint64 offset[n]        byte offset of each sample line
//   uint32 length[n]        its length without the line ending
//   uint64 line_number[n]   1-based; only present when the manifest has blank lines
//                           (otherwise line_number = index + 1)
//
// The header records the manifest's size and modification time: a cached index is
// used only while both match, and only if its checksums verify; otherwise it is
// rebuilt and replaced atomically (write to a temporary file, then rename).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stoker/core/status.h"

namespace stoker::manifest {

class LineIndex {
 public:
  static constexpr uint32_t kVersion = 1;

  struct Source {
    const char* data;
    size_t size;
    int64_t mtime_ns;
  };

  // Scans `source` in two streaming passes. With an empty `cache_path` the index lives
  // on the heap; otherwise it is written straight into a memory-mapped temporary file
  // next to `cache_path` (page cache, not heap) which is then renamed over it, so
  // readers never see a partial index. `name` names the manifest in errors.
  // Errors: ManifestError (a line over 4 GiB), IOError (the cache file).
  static Result<std::unique_ptr<LineIndex>> Build(const Source& source,
                                                  const std::string& name,
                                                  const std::string& cache_path);

  // Maps the cached index at `path` if it is intact and describes `source`; nullptr
  // (not an error) when it is absent, stale or damaged.
  static std::unique_ptr<LineIndex> LoadCached(const std::string& path, const Source& source);

  // The cache file name for a manifest: a hash of its absolute path.
  static std::string CachePath(const std::string& cache_dir, const std::string& manifest_path);

  ~LineIndex();
  LineIndex(const LineIndex&) = delete;
  LineIndex& operator=(const LineIndex&) = delete;

  int64_t num_samples() const { return num_samples_; }
  uint64_t offset(int64_t i) const { return offsets_[i]; }
  uint32_t length(int64_t i) const { return lengths_[i]; }
  int64_t line_number(int64_t i) const {
    return line_numbers_ ? static_cast<int64_t>(line_numbers_[i]) : i + 1;
  }
  size_t size_bytes() const { return bytes_; }

 private:
  LineIndex() = default;
  // Points the arrays into [base, base + bytes) after the header.
  void Attach(uint8_t* base, size_t bytes, int64_t n, bool has_line_numbers);

  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;  // munmap (file) vs free (memory) on destruction
  int64_t num_samples_ = 0;
  const uint64_t* offsets_ = nullptr;
  const uint32_t* lengths_ = nullptr;
  const uint64_t* line_numbers_ = nullptr;
};

}  // namespace stoker::manifest
