// Non-temporal (streaming) stores for large outputs written once: they bypass the
// cache, so a line is not read from memory before being overwritten.
#pragma once

#include <cstddef>

namespace stoker::vision {

// Copies `n` floats from `src` to `dst` (any alignment) with streaming stores where the
// CPU has them. Call StreamFence before other threads may read `dst`.
void StreamFloats(const float* src, size_t n, float* dst);

// Orders the streaming stores before later stores (sfence on x86).
void StreamFence();

}  // namespace stoker::vision
