// Times Stoker's vision kernels one at a time on data that stays in cache, best of N
// runs: the figures that decide a kernel change on a noisy shared machine, where
// end-to-end runs wander by 10-30 % (docs/BENCHMARKS.md, "Vision"). Built with the C++
// tests (STOKER_BUILD_TESTS=ON); ctest runs it once with --iterations 1 as a smoke test.
//
//   build/dev/stoker_bench_kernels                 # best of 300
//   build/dev/stoker_bench_kernels --iterations 20
//
// Each line: the kernel, its case, and nanoseconds per output pixel (resize passes:
// per output byte for the vertical pass) of the SIMD path the CPU dispatches to, next
// to the scalar reference where there is one.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "stoker/vision/patchify.h"
#include "stoker/vision/resize.h"

namespace {

using stoker::vision::AxisTaps;
using stoker::vision::ResizeBackend;

int g_iterations = 300;

template <class F>
double BestSeconds(F&& f) {
  double best = 1e30;
  for (int i = 0; i < g_iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (t < best) best = t;
  }
  return best;
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

const char* Name(ResizeBackend backend) {
  return backend == ResizeBackend::kPillow ? "pillow" : "torchvision";
}

// One band of 28 rows (Qwen2-VL's merge size x patch size) through the horizontal pass.
void Horizontal(ResizeBackend backend, int in_width, int out_width) {
  constexpr int kRows = 28;
  const std::vector<uint8_t> src = RandomBytes(static_cast<size_t>(in_width) * kRows * 3, 1);
  std::vector<uint8_t> dst(static_cast<size_t>(out_width) * kRows * 3);
  AxisTaps taps;
  stoker::vision::PlanAxis(backend, in_width, out_width, &taps);
  const double pixels = static_cast<double>(out_width) * kRows;
  const double simd = BestSeconds(
      [&] { stoker::vision::HorizontalPass(src.data(), kRows, 3, taps, dst.data()); });
  const double scalar = BestSeconds(
      [&] { stoker::vision::HorizontalPassScalar(src.data(), kRows, 3, taps, dst.data()); });
  std::printf("horizontal %-11s %5d -> %5d (%d taps)   %6.2f ns/px   scalar %6.2f\n",
              Name(backend), in_width, out_width, taps.max_taps, simd * 1e9 / pixels,
              scalar * 1e9 / pixels);
}

// 28 output rows of the vertical pass over a 1008-pixel-wide image.
void Vertical(ResizeBackend backend, int in_height, int out_height) {
  constexpr int kWidth = 1008, kRows = 28;
  const std::vector<uint8_t> src =
      RandomBytes(static_cast<size_t>(kWidth) * in_height * 3, 2);
  std::vector<uint8_t> dst(static_cast<size_t>(kWidth) * kRows * 3);
  AxisTaps taps;
  stoker::vision::PlanAxis(backend, in_height, out_height, &taps);
  const int y0 = out_height / 2;
  const double bytes = static_cast<double>(dst.size());
  const double simd = BestSeconds([&] {
    stoker::vision::VerticalPassRows(src.data(), kWidth, 3, taps, y0, y0 + kRows, dst.data());
  });
  const double scalar = BestSeconds([&] {
    stoker::vision::VerticalPassRowsScalar(src.data(), kWidth, 3, taps, y0, y0 + kRows,
                                           dst.data());
  });
  std::printf("vertical   %-11s %5d -> %5d (%d taps)   %6.3f ns/B    scalar %6.3f\n",
              Name(backend), in_height, out_height, taps.max_taps, simd * 1e9 / bytes,
              scalar * 1e9 / bytes);
}

// Rescale + normalise + patchify of Qwen2-VL merge groups (P = 14, m = 2, T = 2),
// output kept in L1 (the same few rows rewritten), so the figure is the kernel's.
void Patchify() {
  constexpr int kWidth = 1008, kP = 14, kM = 2, kT = 2;
  const std::vector<uint8_t> band = RandomBytes(static_cast<size_t>(kWidth) * kP * kM * 3, 3);
  stoker::vision::NormalizeFormula formula;
  formula.mean = {0.48145466f * 255, 0.4578275f * 255, 0.40821073f * 255};
  formula.std = {0.26862954f * 255, 0.26130258f * 255, 0.27577711f * 255};
  const size_t row = 3 * kT * kP * kP;
  std::vector<float> out(kM * kM * row), scratch(row);
  constexpr int kGroups = kWidth / (kP * kM);
  bool ran = true;
  const double t = BestSeconds([&] {
    for (int g = 0; g < kGroups; ++g) {
      ran &= stoker::vision::WritePatchRowsSimd(band.data() + g * kP * kM * 3, kWidth * 3, 1,
                                                kM, kP, kT, formula, out.data(), false,
                                                scratch.data());
    }
  });
  if (!ran) {
    std::printf("patchify   (no 256-bit SIMD on this CPU)\n");
    return;
  }
  std::printf("patchify   qwen2-vl merge groups                    %6.2f ns/px\n",
              t * 1e9 / (kWidth * kP * kM));
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      g_iterations = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--iterations N]\n", argv[0]);
      return 2;
    }
  }
  std::printf("best of %d runs; one band of rows in cache\n", g_iterations);
  for (ResizeBackend backend : {ResizeBackend::kTorchvision, ResizeBackend::kPillow}) {
    Horizontal(backend, 1000, 1008);   // contiguous groups (scale near 1)
    Horizontal(backend, 4000, 4004);
    Horizontal(backend, 1000, 1100);   // an upscale with repeated starts
    Horizontal(backend, 6000, 4004);   // a 24 MP photo shrunk: windowed groups (int16)
    Horizontal(backend, 2000, 1008);   // scale 1/2
    Horizontal(backend, 4000, 1000);   // scale 1/4: the gather path
    Vertical(backend, 1000, 1008);
    Vertical(backend, 3000, 2016);
  }
  Patchify();
  return 0;
}
