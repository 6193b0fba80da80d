// Memory for freshly allocated pixel_values. A large output is written once, in full,
// right after allocation, so its cost is dominated by first-touch page faults; on Linux
// this asks for transparent huge pages (one fault per 2 MiB instead of per 4 KiB).
#pragma once

#include <cstddef>
#include <memory>

namespace stoker::vision {

// Uninitialised room for `floats` floats, at least 64-byte aligned; freed when the last
// reference goes. Throws std::bad_alloc when memory is exhausted.
std::shared_ptr<float> AllocateOutput(size_t floats);

}  // namespace stoker::vision
