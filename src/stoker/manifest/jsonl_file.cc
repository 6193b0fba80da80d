#include "stoker/manifest/jsonl_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker::manifest {

namespace {

bool IsBlank(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p) {
    if (*p != ' ' && *p != '\t' && *p != '\r') return false;
  }
  return true;
}

}  // namespace

Result<std::shared_ptr<JsonlFile>> JsonlFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot open manifest '" + path + "': " + std::strerror(err);
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIOError, message);
  }
  struct stat st;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (!stat_ok || S_ISDIR(st.st_mode)) {
    const int err = stat_ok ? EISDIR : errno;
    ::close(fd);
    return status::IOError("cannot read manifest '", path, "': ", std::strerror(err));
  }
  std::shared_ptr<JsonlFile> file(new JsonlFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return status::IOError("cannot map manifest '", path, "': ", std::strerror(err));
    }
    ::madvise(map, file->size_, MADV_SEQUENTIAL);
    file->data_ = static_cast<const char*>(map);
  }
  ::close(fd);  // the mapping stays valid

  const char* const begin = file->data_;
  const char* const end = begin + file->size_;
  const char* line = begin;
  int64_t line_number = 0;
  while (line < end) {
    ++line_number;
    const char* newline =
        static_cast<const char*>(std::memchr(line, '\n', static_cast<size_t>(end - line)));
    const char* line_end = newline ? newline : end;
    const char* text_end = line_end;
    if (text_end > line && text_end[-1] == '\r') --text_end;
    if (!IsBlank(line, text_end)) {
      const size_t length = static_cast<size_t>(text_end - line);
      if (length > UINT32_MAX) {
        return status::ManifestError(path, ":", std::to_string(line_number),
                                     ": line longer than 4 GiB");
      }
      file->starts_.push_back(static_cast<uint64_t>(line - begin));
      file->lengths_.push_back(static_cast<uint32_t>(length));
      file->line_numbers_.push_back(line_number);
    }
    line = line_end + 1;
  }
  if (file->starts_.empty()) {
    return status::ManifestError("manifest '", path, "' holds no sample (",
                                 std::to_string(file->size_), " bytes, all blank)");
  }
  return file;
}

JsonlFile::~JsonlFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

LineRef JsonlFile::Sample(int64_t index) const {
  return LineRef{std::string_view(data_ + starts_[index], lengths_[index]),
                 line_numbers_[index]};
}

std::string JsonlFile::SampleKey(int64_t index) const {
  return path_ + ":" + std::to_string(line_numbers_[index]);
}

}  // namespace stoker::manifest
