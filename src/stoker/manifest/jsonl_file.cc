#include "stoker/manifest/jsonl_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker::manifest {

Result<std::shared_ptr<JsonlFile>> JsonlFile::Open(const std::string& path,
                                                   const OpenOptions& options,
                                                   const std::string& display_path) {
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
  file->display_path_ = display_path.empty() ? path : display_path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return status::IOError("cannot map manifest '", path, "': ", std::strerror(err));
    }
    file->data_ = static_cast<const char*>(map);
  }
  ::close(fd);  // the mapping stays valid

  const LineIndex::Source source{
      file->data_, file->size_,
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  std::string cache_path;
  if (!options.index_cache_dir.empty()) {
    cache_path = LineIndex::CachePath(options.index_cache_dir, path);
    file->index_ = LineIndex::LoadCached(cache_path, source);
    file->index_from_cache_ = file->index_ != nullptr;
  }
  if (!file->index_) {
    if (file->data_) ::madvise(const_cast<char*>(file->data_), file->size_, MADV_SEQUENTIAL);
    STOKER_ASSIGN_OR_RETURN(file->index_, LineIndex::Build(source, path, cache_path));
    if (file->data_) ::madvise(const_cast<char*>(file->data_), file->size_, MADV_RANDOM);
  }
  if (file->index_->num_samples() == 0) {
    return status::ManifestError("manifest '", path, "' holds no sample (",
                                 std::to_string(file->size_), " bytes, all blank)");
  }
  return file;
}

JsonlFile::~JsonlFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

LineRef JsonlFile::Sample(int64_t index) const {
  return LineRef{std::string_view(data_ + index_->offset(index), index_->length(index)),
                 index_->line_number(index)};
}

std::string JsonlFile::SampleKey(int64_t index) const {
  return display_path_ + ":" + std::to_string(index_->line_number(index));
}

}  // namespace stoker::manifest
