// WeightedInterleave: which source each position of the global stream draws from.
//
// Source i (integer weight w_i) has its j-th draw scheduled at virtual time
// (2j + 1) / (2 w_i); the stream is the merge of all sources' draws by virtual time,
// ties going to the lower source index. After t draws, source i has been drawn
// floor(t * w_i / W) or that +/- 1 times (W = sum of weights), so the mix matches the
// weights within one sample over every window, not just on average.
//
// The schedule has a closed form, so the state at any position is computed directly
// (At), never by replaying the positions before it: a resumed run at sample 10^9 starts
// as fast as one at 0. Comparisons are exact integer arithmetic (128-bit products).
#pragma once

#include <cstdint>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::plan {

class WeightedInterleave {
 public:
  // Weights must be > 0 and at most kMaxWeight.
  static constexpr uint64_t kMaxWeight = uint64_t{1} << 40;
  static Result<WeightedInterleave> Make(std::vector<uint64_t> weights);

  int num_sources() const { return static_cast<int>(weights_.size()); }
  const std::vector<uint64_t>& weights() const { return weights_; }

  // Draws per source among the first t positions of the stream.
  std::vector<int64_t> At(int64_t t) const;

  // The source of the next position after `counts` (as returned by At), and advances
  // `counts` by that draw.
  int Next(std::vector<int64_t>& counts) const;

 private:
  explicit WeightedInterleave(std::vector<uint64_t> weights) : weights_(std::move(weights)) {}

  // Is draw a of source i (virtual time (2a+1)/(2w_i)) before draw b of source j?
  bool Before(int i, int64_t a, int j, int64_t b) const;

  std::vector<uint64_t> weights_;
  unsigned __int128 total_ = 0;
};

}  // namespace stoker::plan
