#include "stoker/io/local_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker::io {

namespace {

Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  std::string message = what + " '" + path + "': " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return Status(StatusCode::kNotFound, message);
  return Status(StatusCode::kIOError, message);
}

// Closes the descriptor on every return path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Status ReadFile(const std::string& path, Body* out) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (S_ISDIR(st.st_mode)) return ErrnoStatus(EISDIR, "cannot read", path);
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = ::read(fd.get(), out->data() + done, out->size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path);
    }
    if (n == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return Status::OK();
}

std::string ResolvePath(const std::string& root, const std::string& relative) {
  if (root.empty() || (!relative.empty() && relative[0] == '/') ||
      relative.find("://") != std::string::npos) {
    return relative;
  }
  if (root.back() == '/') return root + relative;
  return root + "/" + relative;
}

}  // namespace stoker::io
