// Memory for freshly allocated pixel_values. A large output is written once, in full,
// right after allocation, so its cost is dominated by first-touch page faults and the
// kernel zeroing new pages: on Linux it asks for transparent huge pages (one fault per
// 2 MiB instead of per 4 KiB), and the mappings of released outputs are kept for the
// next call, as a caching allocator does, so repeated calls write into memory that is
// already mapped.
//
// Mappings are sized in powers of two (only written pages take memory), kept ones are
// bounded (kMaxKeptOutputs mappings, kMaxKeptOutputBytes of address space in all) and
// marked MADV_FREE, so under memory pressure the kernel reclaims their pages instead
// of swapping; a reused one then faults in fresh pages again, which is still correct.
#pragma once

#include <cstddef>
#include <memory>

namespace stoker::vision {

// Uninitialised room for `floats` floats, at least 64-byte aligned; given back when
// the last reference goes. Throws std::bad_alloc when memory is exhausted.
std::shared_ptr<float> AllocateOutput(size_t floats);

inline constexpr size_t kMaxKeptOutputs = 8;
inline constexpr size_t kMaxKeptOutputBytes = size_t{2} << 30;  // of address space
// Bytes of released output mappings kept for reuse now (for tests and stats).
size_t KeptOutputBytes();

}  // namespace stoker::vision
