// io::Body: the vector an object's bytes travel in, from the store to the decoders.
//
// Two differences from std::vector<uint8_t>, both for the read path:
// - growing it (resize) leaves the new bytes uninitialized. Every writer (pread, a
//   socket, a copy out of the receive buffer) overwrites them at once, and a zero fill
//   first would add a pass over every byte read;
// - its storage is 64-byte (cache-line) aligned. The kernel's copy out of a socket is
//   markedly slower into memory that is not (docs/BENCHMARKS.md, object storage IO).
// It converts to std::span<const uint8_t>, which is what the decoders take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace stoker::io {

inline constexpr size_t kBodyAlignment = 64;

template <class T>
class BodyAllocator {
 public:
  using value_type = T;

  BodyAllocator() noexcept = default;
  template <class U>
  BodyAllocator(const BodyAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    return static_cast<T*>(
        ::operator new(n * sizeof(T), std::align_val_t{kBodyAlignment}));
  }
  void deallocate(T* p, size_t n) noexcept {
    ::operator delete(p, n * sizeof(T), std::align_val_t{kBodyAlignment});
  }
  // Value-less construction default-initializes: for bytes, it leaves them as they are.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const BodyAllocator<U>&) const noexcept {
    return true;
  }
};

using Body = std::vector<uint8_t, BodyAllocator<uint8_t>>;

}  // namespace stoker::io
