// Permutation: a keyed bijection of [0, n), computed on demand in O(1) memory.
//
// A shuffled epoch over a 10^8-sample source needs position -> sample without storing
// 10^8 integers, and must be the same on every rank and after every restart. A
// Feistel network over the smallest power-of-two domain >= n is a bijection of that
// domain for any round function; "cycle walking" (apply it again while the result is
// >= n) restricts it to [0, n) and stays a bijection. The domain is < 2n, so the
// expected number of walks is below 2.
#pragma once

#include <cstdint>
#include <utility>

namespace stoker::plan {

// SplitMix64's finaliser: a fast, well-mixed 64-bit hash (Steele et al., 2014).
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Combines values into one key, order-sensitively.
constexpr uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return Mix64(seed ^ Mix64(value));
}

class Permutation {
 public:
  // Six rounds: enough for a statistically good shuffle (four make a pseudo-random
  // permutation in theory; the extra two cost nothing measurable).
  static constexpr int kRounds = 6;

  Permutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
    int bits = 2;  // a Feistel network needs two halves of at least one bit
    while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
    left_bits_ = bits / 2;
    right_bits_ = bits - left_bits_;
  }

  uint64_t size() const { return n_; }

  // Precondition: i < size().
  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do {
      x = Encrypt(x);
    } while (x >= n_);
    return x;
  }

 private:
  uint64_t Encrypt(uint64_t x) const {
    const uint64_t left_mask = (uint64_t{1} << left_bits_) - 1;
    const uint64_t right_mask = (uint64_t{1} << right_bits_) - 1;
    uint64_t left = x >> right_bits_;
    uint64_t right = x & right_mask;
    // Unbalanced halves alternate roles, so each round maps right -> left width and back.
    int lb = left_bits_, rb = right_bits_;
    uint64_t lm = left_mask, rm = right_mask;
    for (int round = 0; round < kRounds; ++round) {
      const uint64_t f = Mix64(right ^ HashCombine(key_, static_cast<uint64_t>(round)));
      const uint64_t new_right = (left ^ f) & lm;
      left = right;
      right = new_right;
      std::swap(lb, rb);
      std::swap(lm, rm);
    }
    // After an even number of rounds the halves have their original widths.
    return (left << rb) | right;
  }

  uint64_t n_;
  uint64_t key_;
  int left_bits_;
  int right_bits_;
};

}  // namespace stoker::plan
