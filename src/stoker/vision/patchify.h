// SIMD helpers of ImageProcessor::Run (runtime dispatch, like the resize passes):
// rescale + normalise + patchify of one block row of patches, and non-temporal
// (streaming) stores for large outputs written once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace stoker::vision {

// Rescale + normalise as float32 arithmetic: y = (float(v) / divisor - mean[c]) / std[c]
// (the division by divisor is skipped when divisor is 1, which changes nothing).
// ImageProcessor uses it only after checking that it reproduces its lookup table for
// all 256 values of every channel, so the SIMD path is exact by exhaustion, not by
// argument. (A multiply by the reciprocal plus one fused correction was tried in place
// of the divisions: exact on every published config, but no faster once the kernel
// kept its vectors in registers, so the divisions stayed.)
struct NormalizeFormula {
  float divisor = 1.0f;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  float Apply(int c, uint8_t v) const {
    float x = static_cast<float>(v);
    if (divisor != 1.0f) x = x / divisor;
    return (x - mean[c]) / std[c];
  }
};

// Writes the pixel_values rows of one block row of patches: `band` holds m * p rows of
// an interleaved RGB image (`stride` bytes apart), `wb` merge groups wide. Row layout
// as ImageProcessor::Run documents. With `stream`, each row is built in `row` (room for
// 3 * t * p * p floats) and copied to `out` with streaming stores. Returns false, having
// written nothing, when the CPU's SIMD target cannot run it (then use the scalar path).
bool WritePatchRowsSimd(const uint8_t* band, size_t stride, int64_t wb, int m, int p,
                        int t, const NormalizeFormula& formula, float* out, bool stream,
                        float* row);

// Copies `n` floats from `src` to `dst` (any alignment) with streaming stores where the
// CPU has them. Call StreamFence before other threads may read `dst`.
void StreamFloats(const float* src, size_t n, float* dst);

// Orders the streaming stores before later stores (sfence on x86).
void StreamFence();

}  // namespace stoker::vision
