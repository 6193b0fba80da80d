// TensorView: a typed, shaped view of memory plus a reference that keeps it alive.
//
// This is how every array leaves the engine. The Python binding turns a TensorView
// into a DLPack tensor (torch when installed, NumPy otherwise) whose deleter drops
// `owner`, so the consumer reads the engine's memory without a copy and the memory
// returns to its BufferPool when the consumer lets go.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

namespace stoker {

enum class DType : uint8_t { kUInt8, kInt32, kInt64, kFloat32 };

constexpr int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kFloat32: return 4;
  }
  return 0;
}

struct TensorView {
  static constexpr int kMaxDims = 4;

  void* data = nullptr;
  DType dtype = DType::kUInt8;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};  // row-major (C-contiguous)
  // Anything whose lifetime covers `data`; type-erased so views of pooled buffers,
  // batch arenas and mapped files all look the same to the binding.
  std::shared_ptr<const void> owner;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  int64_t num_bytes() const { return num_elements() * DTypeSize(dtype); }
};

}  // namespace stoker
