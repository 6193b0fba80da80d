#include "stoker/vision/output_buffer.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace stoker::vision {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

std::shared_ptr<float> AllocateOutput(size_t floats) {
  const size_t bytes = floats * sizeof(float);
#if defined(__linux__)
  if (bytes >= kHugePage) {
    // Map one huge page more than needed, so the start can be moved to a 2 MiB
    // boundary: only whole, aligned 2 MiB ranges can be backed by huge pages.
    const size_t mapped = bytes + kHugePage;
    void* map = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (map == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<uintptr_t>(map);
    const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
    // Advisory: without transparent huge pages this changes nothing.
    ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
    return std::shared_ptr<float>(reinterpret_cast<float*>(aligned),
                                  [map, mapped](float*) { ::munmap(map, mapped); });
  }
#endif
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
}

}  // namespace stoker::vision
