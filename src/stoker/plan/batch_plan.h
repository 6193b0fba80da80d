// BatchPlan: which samples form batch k — decided before any byte is read.
//
// The foundation plan is sequential: batch k holds samples [k * B, (k + 1) * B) of the
// manifest; the last batch is short unless drop_last. Shuffling, weighted sources and
// rank sharding replace this with a permutation, keeping the same contract: a pure
// function of the configuration, so workers may run in any order and a resumed run
// sees the same batches.
#pragma once

#include <algorithm>
#include <cstdint>

#include "stoker/core/status.h"

namespace stoker::plan {

struct SampleRange {
  int64_t begin;  // first sample index
  int64_t end;    // one past the last
  int64_t size() const { return end - begin; }
};

class BatchPlan {
 public:
  static Result<BatchPlan> Make(int64_t num_samples, int64_t batch_size, bool drop_last) {
    if (batch_size < 1) {
      return status::InvalidArgument("batch_size must be >= 1, got ",
                                     std::to_string(batch_size));
    }
    if (num_samples < 0) return status::InvalidArgument("negative sample count");
    return BatchPlan(num_samples, batch_size, drop_last);
  }

  int64_t num_batches() const { return num_batches_; }
  int64_t batch_size() const { return batch_size_; }
  // Precondition: 0 <= batch < num_batches().
  SampleRange Batch(int64_t batch) const {
    const int64_t begin = batch * batch_size_;
    return {begin, std::min(begin + batch_size_, num_samples_)};
  }

 private:
  BatchPlan(int64_t num_samples, int64_t batch_size, bool drop_last)
      : num_samples_(num_samples),
        batch_size_(batch_size),
        num_batches_(drop_last ? num_samples / batch_size
                               : (num_samples + batch_size - 1) / batch_size) {}

  int64_t num_samples_;
  int64_t batch_size_;
  int64_t num_batches_;
};

}  // namespace stoker::plan
