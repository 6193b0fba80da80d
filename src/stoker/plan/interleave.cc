#include "stoker/plan/interleave.h"

#include <string>

namespace stoker::plan {

using u128 = unsigned __int128;

Result<WeightedInterleave> WeightedInterleave::Make(std::vector<uint64_t> weights) {
  if (weights.empty()) return status::InvalidArgument("no sources to interleave");
  u128 total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] == 0 || weights[i] > kMaxWeight) {
      return status::InvalidArgument("source ", std::to_string(i), " has weight ",
                                     std::to_string(weights[i]), " (must be in 1..2^40)");
    }
    total += weights[i];
  }
  WeightedInterleave interleave(std::move(weights));
  interleave.total_ = total;
  return interleave;
}

bool WeightedInterleave::Before(int i, int64_t a, int j, int64_t b) const {
  const u128 lhs = static_cast<u128>(2 * a + 1) * weights_[j];
  const u128 rhs = static_cast<u128>(2 * b + 1) * weights_[i];
  return lhs < rhs || (lhs == rhs && i < j);
}

std::vector<int64_t> WeightedInterleave::At(int64_t t) const {
  const int n = num_sources();
  std::vector<int64_t> counts(n);
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    counts[i] = static_cast<int64_t>(static_cast<u128>(t) * weights_[i] / total_);
    sum += counts[i];
  }
  // The estimate is within one draw per source of the exact state. Repair it: first
  // make the count right, then swap any draw that is later than one left out.
  auto next_source = [&] {  // the earliest draw not yet taken
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (Before(i, counts[i], best, counts[best])) best = i;
    }
    return best;
  };
  auto last_source = [&] {  // the latest draw taken (-1 if none)
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (counts[i] == 0) continue;
      if (best < 0 || Before(best, counts[best] - 1, i, counts[i] - 1)) best = i;
    }
    return best;
  };
  while (sum < t) {
    ++counts[next_source()];
    ++sum;
  }
  while (sum > t) {
    --counts[last_source()];
    --sum;
  }
  while (true) {
    const int last = last_source();
    const int next = next_source();
    if (last < 0 || !Before(next, counts[next], last, counts[last] - 1)) break;
    --counts[last];
    ++counts[next];
  }
  return counts;
}

int WeightedInterleave::Next(std::vector<int64_t>& counts) const {
  int best = 0;
  for (int i = 1; i < num_sources(); ++i) {
    if (Before(i, counts[i], best, counts[best])) best = i;
  }
  ++counts[best];
  return best;
}

}  // namespace stoker::plan
