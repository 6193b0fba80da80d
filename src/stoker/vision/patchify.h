// SIMD helpers of ImageProcessor::Run (runtime dispatch, like the resize passes):
// rescale + normalise + patchify of one block row of patches, and non-temporal
// (streaming) stores for large outputs written once.
#pragma once

#include <array>
#include <cstddef>
#include <cmath>
#include <cstdint>

namespace stoker::vision {

// Rescale + normalise as float32 arithmetic: y = (float(v) / divisor - mean[c]) / std[c]
// (the division by divisor is skipped when divisor is 1, which changes nothing).
//
// With `reciprocal`, each division a / b is done as a multiply by r = 1/b followed by
// one correction with the exact remainder: q = a*r; e = fma(-q, b, a); q += e*r (fused).
// That is a few cycles instead of a vector division, and gives the correctly rounded
// quotient in all but rare cases. ImageProcessor uses a formula only after checking
// that it reproduces its lookup table for all 256 values of every channel (trying
// `reciprocal` first, plain division next), so the SIMD path is exact by exhaustion,
// not by argument. The vector code performs the same IEEE operations in the same order.
struct NormalizeFormula {
  float divisor = 1.0f;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  bool reciprocal = false;
  float inverse_divisor = 1.0f;        // 1 / divisor, rounded to float
  std::array<float, 3> inverse_std{};  // 1 / std[c], rounded to float

  void SetReciprocal(bool on) {
    reciprocal = on;
    inverse_divisor = 1.0f / divisor;
    for (int c = 0; c < 3; ++c) inverse_std[c] = 1.0f / std[c];
  }
  static float Divide(float a, float b, float inverse, bool reciprocal) {
    if (!reciprocal) return a / b;
    const float q = a * inverse;
    const float e = std::fma(-q, b, a);
    return std::fma(e, inverse, q);
  }
  float Apply(int c, uint8_t v) const {
    float x = static_cast<float>(v);
    if (divisor != 1.0f) x = Divide(x, divisor, inverse_divisor, reciprocal);
    return Divide(x - mean[c], std[c], inverse_std[c], reciprocal);
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
