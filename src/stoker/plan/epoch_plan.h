// EpochPlan: the global sample order of one epoch and each rank's share of it.
//
// A pure function of (configuration, epoch): every rank computes the same global
// stream and takes its own slice, so ranks never exchange data about it, a restart
// continues exactly where the trainer stopped, and a restart with a different number
// of ranks (same global batch size) sees the same global stream.
//
//   global stream:  position p -> source s = interleave(p), that source's d-th draw;
//                   sample = shuffle ? Permutation(seed, epoch, s, pass)(d mod N_s)
//                                    : d mod N_s,   pass = d / N_s
//   global batch k: positions [k G, (k+1) G), G = batch_size * world_size
//   rank r, batch k: the r-th slice of B = batch_size positions of global batch k
//
// Epoch length by policy: kFirstExhausted ends at the draw that exhausts a source
// (one source: one pass); kFixedSamples draws samples_per_epoch (sources wrap with a
// fresh permutation per pass); kRepeat draws every sample of source s exactly
// repeat_s times (interleaved in proportion to repeat_s * N_s).
//
// Every rank gets the same number of batches: a final partial global batch is split as
// evenly as possible (sizes differ by at most one) and dropped if it holds fewer
// samples than there are ranks, or if drop_last; dropped_tail() says how many samples
// that left out.
#pragma once

#include <cstdint>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/plan/interleave.h"

namespace stoker::plan {

enum class EpochPolicy { kFirstExhausted, kFixedSamples, kRepeat };

struct SourcePlan {
  int64_t num_samples = 0;
  uint64_t weight = 1;  // relative, integer (the binding scales float weights)
  int64_t repeat = 1;   // kRepeat only
};

struct PlanConfig {
  std::vector<SourcePlan> sources;
  uint64_t seed = 0;
  bool shuffle = false;
  EpochPolicy policy = EpochPolicy::kFirstExhausted;
  int64_t samples_per_epoch = 0;  // kFixedSamples only
  int64_t batch_size = 1;         // per rank
  int world_size = 1;
  int rank = 0;
  bool drop_last = false;
};

struct SampleRef {
  int32_t source = 0;
  int64_t index = 0;  // sample index within the source
  bool operator==(const SampleRef&) const = default;
};

// Checks what can be checked before the sources are opened: batch size, rank and world
// size, the policy's parameters, each source's weight and repeat (num_samples ignored).
Status ValidatePlanOptions(const PlanConfig& config);

class EpochPlan {
 public:
  // Errors: InvalidArgument naming the option (no sources, an empty source, weights,
  // rank outside [0, world_size), ...).
  static Result<EpochPlan> Make(const PlanConfig& config, int64_t epoch);

  int64_t epoch() const { return epoch_; }
  int64_t epoch_samples() const { return epoch_samples_; }
  int64_t global_batch_size() const { return global_batch_; }
  // Batches of this rank in the epoch; the same on every rank.
  int64_t num_batches() const { return num_batches_; }
  int64_t dropped_tail() const { return dropped_tail_; }

  // This rank's batch k (0 <= k < num_batches()), in stream order.
  void RankBatch(int64_t k, std::vector<SampleRef>* out) const;
  // All ranks' samples of global batch k, in stream order (rank 0's slice first).
  void GlobalBatch(int64_t k, std::vector<SampleRef>* out) const;

  // The deterministic substitute for a failed sample (on_error="skip"): a weighted
  // random draw keyed by (seed, epoch, batch, slot, attempt), so a resumed run and
  // every rank replace the same failure with the same sample.
  SampleRef Replacement(int64_t batch, int64_t slot, int attempt) const;

 private:
  EpochPlan(const PlanConfig& config, int64_t epoch, WeightedInterleave interleave)
      : config_(config), epoch_(epoch), interleave_(std::move(interleave)) {}
  void Positions(int64_t begin, int64_t end, std::vector<SampleRef>* out) const;
  SampleRef Resolve(int source, int64_t draw) const;

  PlanConfig config_;
  int64_t epoch_;
  WeightedInterleave interleave_;
  int64_t epoch_samples_ = 0;
  int64_t global_batch_ = 1;
  int64_t num_batches_ = 0;
  int64_t dropped_tail_ = 0;
};

}  // namespace stoker::plan
