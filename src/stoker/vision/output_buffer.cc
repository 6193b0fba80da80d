#include "stoker/vision/output_buffer.h"

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace stoker::vision {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

#if defined(__linux__)
struct Mapping {
  void* map = nullptr;
  size_t mapped = 0;
};

// Released output mappings, most recent last.
class KeptMappings {
 public:
  // The smallest kept mapping of at least `need` bytes and at most four times that, or
  // none: with sizes in powers of two, one of the same or the next size. (Only the
  // pages an output writes are touched; a larger mapping costs address space, and
  // holds the earlier use's pages beyond `need` while the output lives.)
  Mapping Take(size_t need) {
    std::lock_guard lock(mutex_);
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const size_t size = kept_[i].mapped;
      if (size >= need && size <= 4 * need &&
          (best == kept_.size() || size < kept_[best].mapped)) {
        best = i;
      }
    }
    if (best == kept_.size()) return {};
    const Mapping m = kept_[best];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
    bytes_ -= m.mapped;
    return m;
  }

  void Give(Mapping m) {
    std::vector<Mapping> evicted;
    if (m.mapped > kMaxKeptOutputBytes) {
      evicted.push_back(m);
    } else {
      // Reclaimable under memory pressure; otherwise the pages stay mapped.
      ::madvise(m.map, m.mapped, MADV_FREE);
      std::lock_guard lock(mutex_);
      kept_.push_back(m);
      bytes_ += m.mapped;
      while (kept_.size() > kMaxKeptOutputs || bytes_ > kMaxKeptOutputBytes) {
        evicted.push_back(kept_.front());
        bytes_ -= kept_.front().mapped;
        kept_.erase(kept_.begin());
      }
    }
    for (const Mapping& e : evicted) ::munmap(e.map, e.mapped);  // outside the lock
  }

  size_t bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Mapping> kept_;  // guarded by mutex_
  size_t bytes_ = 0;           // guarded by mutex_
};

// Never destroyed: outputs may be released by Python after static destructors ran.
KeptMappings& Kept() {
  static auto* kept = new KeptMappings;
  return *kept;
}
#endif

}  // namespace

std::shared_ptr<float> AllocateOutput(size_t floats) {
  const size_t bytes = floats * sizeof(float);
#if defined(__linux__)
  if (bytes >= kHugePage) {
    // One huge page more than needed, so the start can be moved to a 2 MiB boundary:
    // only whole, aligned 2 MiB ranges can be backed by huge pages.
    const size_t need = bytes + kHugePage;
    Mapping m = Kept().Take(need);
    if (m.map == nullptr) {
      // Mapped in powers of two, so that a slightly larger output later can reuse this
      // one: address space is cheap, only the pages written are backed by memory.
      const size_t size = std::bit_ceil(need);
      m.map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                     0);
      if (m.map == MAP_FAILED) throw std::bad_alloc();
      m.mapped = size;
      // Advisory: without transparent huge pages this changes nothing.
      ::madvise(m.map, m.mapped, MADV_HUGEPAGE);
    }
    const auto base = reinterpret_cast<uintptr_t>(m.map);
    const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
    return std::shared_ptr<float>(reinterpret_cast<float*>(aligned),
                                  [m](float*) { Kept().Give(m); });
  }
#endif
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
}

size_t KeptOutputBytes() {
#if defined(__linux__)
  return Kept().bytes();
#else
  return 0;
#endif
}

}  // namespace stoker::vision
