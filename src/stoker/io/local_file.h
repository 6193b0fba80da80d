// Local file reads. The object-store interface (S3, HTTP) will sit beside this; for
// now the loader reads images from a local directory tree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/io/body.h"

namespace stoker::io {

// Reads the whole file at `path` into `out` (resized; its capacity is reused, so a
// worker that keeps one Body allocates only when a file is larger than any before).
// Errors: NotFound (no such file), IOError (permission, a directory, read failure),
// each naming the path and the OS error.
Status ReadFile(const std::string& path, Body* out);

// `relative` joined onto `root` unless it is absolute (a path starting with '/', or a
// URI such as s3://bucket/key); `root` may be empty, a directory or a URI prefix.
std::string ResolvePath(const std::string& root, const std::string& relative);

}  // namespace stoker::io
