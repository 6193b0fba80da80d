#include "stoker/manifest/line_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace stoker::manifest {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'K', 'I', 'D', 'X', '\0', '\1'};
constexpr uint32_t kHasLineNumbers = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;
  uint64_t manifest_size;
  int64_t manifest_mtime_ns;
  uint64_t num_samples;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // XXH3-64 of everything after the header
  uint64_t header_checksum;   // XXH3-64 of the header's first 56 bytes
};
static_assert(sizeof(Header) == 64, "the on-disk header is 64 bytes");
constexpr size_t kHeaderChecksummed = offsetof(Header, header_checksum);

size_t RoundUp8(size_t n) { return (n + 7) & ~size_t{7}; }

size_t PayloadBytes(int64_t n, bool has_line_numbers) {
  const size_t count = static_cast<size_t>(n);
  return count * 8 + RoundUp8(count * 4) + (has_line_numbers ? count * 8 : 0);
}

bool IsBlank(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (*p != ' ' && *p != '\t' && *p != '\r') return false;
  }
  return true;
}

// Calls visit(line_begin, text_end, line_number) for every sample (non-blank) line.
template <typename Visit>
void ForEachSampleLine(const char* data, size_t size, Visit&& visit) {
  const char* const end = data + size;
  const char* line = data;
  int64_t line_number = 0;
  while (line < end) {
    ++line_number;
    const char* newline =
        static_cast<const char*>(std::memchr(line, '\n', static_cast<size_t>(end - line)));
    const char* line_end = newline ? newline : end;
    const char* text_end = line_end;
    if (text_end > line && text_end[-1] == '\r') --text_end;
    if (!IsBlank(line, text_end)) visit(line, text_end, line_number);
    line = line_end + 1;
  }
}

std::string ErrnoMessage(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

}  // namespace

LineIndex::~LineIndex() {
  if (base_ == nullptr) return;
  if (mapped_) {
    ::munmap(base_, bytes_);
  } else {
    std::free(base_);
  }
}

void LineIndex::Attach(uint8_t* base, size_t bytes, int64_t n, bool has_line_numbers) {
  base_ = base;
  bytes_ = bytes;
  num_samples_ = n;
  uint8_t* p = base + sizeof(Header);
  offsets_ = reinterpret_cast<const uint64_t*>(p);
  p += static_cast<size_t>(n) * 8;
  lengths_ = reinterpret_cast<const uint32_t*>(p);
  p += RoundUp8(static_cast<size_t>(n) * 4);
  line_numbers_ = has_line_numbers ? reinterpret_cast<const uint64_t*>(p) : nullptr;
}

Result<std::unique_ptr<LineIndex>> LineIndex::Build(const Source& source,
                                                    const std::string& name,
                                                    const std::string& cache_path) {
  // Pass 1: count sample lines, note whether blank lines shift line numbers.
  int64_t n = 0;
  bool has_blank_lines = false;
  int64_t too_long_line = 0;
  ForEachSampleLine(source.data, source.size,
                    [&](const char* begin, const char* end, int64_t line_number) {
                      if (line_number != n + 1) has_blank_lines = true;
                      if (static_cast<uint64_t>(end - begin) > UINT32_MAX && !too_long_line) {
                        too_long_line = line_number;
                      }
                      ++n;
                    });
  if (too_long_line) {
    return status::ManifestError(name, ":", std::to_string(too_long_line),
                                 ": line longer than 4 GiB");
  }
  const size_t payload = PayloadBytes(n, has_blank_lines);
  const size_t bytes = sizeof(Header) + payload;

  std::unique_ptr<LineIndex> index(new LineIndex());
  std::string tmp_path;
  if (cache_path.empty()) {
    auto* base = static_cast<uint8_t*>(std::malloc(bytes));
    if (base == nullptr) return status::LimitExceeded("out of memory indexing ", name);
    index->Attach(base, bytes, n, has_blank_lines);
  } else {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache_path).parent_path(), ec);
    tmp_path = cache_path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return status::IOError(ErrnoMessage("cannot create index", tmp_path));
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      Status st = status::IOError(ErrnoMessage("cannot size index", tmp_path));
      ::close(fd);
      ::unlink(tmp_path.c_str());
      return st;
    }
    void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
      ::unlink(tmp_path.c_str());
      return status::IOError(ErrnoMessage("cannot map index", tmp_path));
    }
    index->mapped_ = true;
    index->Attach(static_cast<uint8_t*>(map), bytes, n, has_blank_lines);
  }

  // Pass 2: fill the arrays (written through non-const aliases of the same memory).
  auto* offsets = const_cast<uint64_t*>(index->offsets_);
  auto* lengths = const_cast<uint32_t*>(index->lengths_);
  auto* line_numbers = const_cast<uint64_t*>(index->line_numbers_);
  int64_t i = 0;
  ForEachSampleLine(source.data, source.size,
                    [&](const char* begin, const char* end, int64_t line_number) {
                      offsets[i] = static_cast<uint64_t>(begin - source.data);
                      lengths[i] = static_cast<uint32_t>(end - begin);
                      if (line_numbers) line_numbers[i] = static_cast<uint64_t>(line_number);
                      ++i;
                    });
  // Zero the padding after the lengths so the checksum is reproducible.
  const size_t pad = RoundUp8(static_cast<size_t>(n) * 4) - static_cast<size_t>(n) * 4;
  std::memset(reinterpret_cast<uint8_t*>(lengths + n), 0, pad);

  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.flags = has_blank_lines ? kHasLineNumbers : 0;
  header.manifest_size = source.size;
  header.manifest_mtime_ns = source.mtime_ns;
  header.num_samples = static_cast<uint64_t>(n);
  header.payload_bytes = payload;
  header.payload_checksum = XXH3_64bits(index->base_ + sizeof(Header), payload);
  header.header_checksum = XXH3_64bits(&header, kHeaderChecksummed);
  std::memcpy(index->base_, &header, sizeof(Header));

  if (!tmp_path.empty()) {
    // Publish: the rename is atomic, so a concurrent reader sees the old index or the
    // complete new one. Failing to publish is not fatal: the mapping stays usable.
    if (::msync(index->base_, bytes, MS_SYNC) != 0 ||
        ::rename(tmp_path.c_str(), cache_path.c_str()) != 0) {
      ::unlink(tmp_path.c_str());
    }
  }
  return index;
}

std::unique_ptr<LineIndex> LineIndex::LoadCached(const std::string& path,
                                                 const Source& source) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Header)) {
    ::close(fd);
    return nullptr;
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return nullptr;
  std::unique_ptr<LineIndex> index(new LineIndex());
  index->mapped_ = true;
  index->base_ = static_cast<uint8_t*>(map);
  index->bytes_ = bytes;  // unmapped by the destructor on every return below

  Header header;
  std::memcpy(&header, map, sizeof(Header));
  const bool valid =
      std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0 &&
      header.header_checksum == XXH3_64bits(&header, kHeaderChecksummed) &&
      header.version == kVersion && header.manifest_size == source.size &&
      header.manifest_mtime_ns == source.mtime_ns &&
      header.payload_bytes ==
          PayloadBytes(static_cast<int64_t>(header.num_samples),
                       (header.flags & kHasLineNumbers) != 0) &&
      bytes == sizeof(Header) + header.payload_bytes &&
      header.payload_checksum ==
          XXH3_64bits(index->base_ + sizeof(Header), header.payload_bytes);
  if (!valid) return nullptr;
  index->Attach(index->base_, bytes, static_cast<int64_t>(header.num_samples),
                (header.flags & kHasLineNumbers) != 0);
  // Offsets grow with the index, so checking the last bounds them all: one past the
  // manifest would mean a bug or a forged file.
  const int64_t last = index->num_samples_ - 1;
  if (last >= 0 && index->offsets_[last] + index->lengths_[last] > source.size) {
    return nullptr;
  }
  return index;
}

std::string LineIndex::CachePath(const std::string& cache_dir,
                                 const std::string& manifest_path) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(manifest_path, ec).lexically_normal().string();
  if (ec) absolute = manifest_path;
  char name[40];
  std::snprintf(name, sizeof(name), "%016llx.stkidx",
                static_cast<unsigned long long>(XXH3_64bits(absolute.data(), absolute.size())));
  return (std::filesystem::path(cache_dir) / name).string();
}

}  // namespace stoker::manifest
