#include "stoker/plan/epoch_plan.h"

#include <algorithm>
#include <string>

#include "stoker/plan/permutation.h"

namespace stoker::plan {

namespace {

using u128 = unsigned __int128;

// Domain tags keep the hash streams of different uses independent.
constexpr uint64_t kShuffleTag = 0x53485546464C45ull;      // "SHUFFLE"
constexpr uint64_t kReplacementTag = 0x5245504C414345ull;  // "REPLACE"

// kFirstExhausted: the number of positions up to and including the draw that exhausts
// the first source (the source whose last draw has the earliest virtual time).
int64_t FirstExhaustedLength(const std::vector<SourcePlan>& sources,
                             const std::vector<uint64_t>& w) {
  const int n = static_cast<int>(sources.size());
  // Last draw of source i is number N_i - 1, at virtual time (2 N_i - 1) / (2 w_i).
  int first = 0;
  for (int i = 1; i < n; ++i) {
    const u128 lhs = static_cast<u128>(2 * sources[i].num_samples - 1) * w[first];
    const u128 rhs = static_cast<u128>(2 * sources[first].num_samples - 1) * w[i];
    if (lhs < rhs) first = i;  // ties keep the lower index, as the stream does
  }
  const u128 end_num = static_cast<u128>(2 * sources[first].num_samples - 1);
  const u128 end_den = w[first];
  int64_t total = 0;
  for (int k = 0; k < n; ++k) {
    // Draws j of source k with (2j + 1) / w_k <= end_num / end_den (in the ordering,
    // with equal times counted only for k <= first).
    u128 count = (end_num * w[k] + end_den) / (2 * end_den);
    if (count > 0 && k > first &&
        (2 * (count - 1) + 1) * end_den == end_num * w[k]) {
      --count;
    }
    total += static_cast<int64_t>(std::min<u128>(count, sources[k].num_samples));
  }
  return total;
}

}  // namespace

Status ValidatePlanOptions(const PlanConfig& config) {
  if (config.sources.empty()) return status::InvalidArgument("no sources");
  if (config.batch_size < 1) {
    return status::InvalidArgument("batch_size must be >= 1, got ",
                                   std::to_string(config.batch_size));
  }
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return status::InvalidArgument("rank must be in [0, world_size): rank=",
                                   std::to_string(config.rank),
                                   ", world_size=", std::to_string(config.world_size));
  }
  if (config.policy == EpochPolicy::kFixedSamples && config.samples_per_epoch < 1) {
    return status::InvalidArgument("samples_per_epoch must be >= 1, got ",
                                   std::to_string(config.samples_per_epoch));
  }
  for (size_t i = 0; i < config.sources.size(); ++i) {
    const SourcePlan& s = config.sources[i];
    if (config.policy == EpochPolicy::kRepeat && s.repeat < 1) {
      return status::InvalidArgument("source ", std::to_string(i), ": repeat must be >= 1");
    }
    if (config.policy != EpochPolicy::kRepeat &&
        (s.weight == 0 || s.weight > WeightedInterleave::kMaxWeight)) {
      return status::InvalidArgument("source ", std::to_string(i), " has weight ",
                                     std::to_string(s.weight), " (must be in 1..2^40)");
    }
  }
  return Status::OK();
}

Result<EpochPlan> EpochPlan::Make(const PlanConfig& config, int64_t epoch) {
  STOKER_RETURN_NOT_OK(ValidatePlanOptions(config));
  if (epoch < 0) return status::InvalidArgument("negative epoch");
  std::vector<uint64_t> weights;
  for (size_t i = 0; i < config.sources.size(); ++i) {
    const SourcePlan& s = config.sources[i];
    if (s.num_samples < 1) {
      return status::InvalidArgument("source ", std::to_string(i), " has no samples");
    }
    if (config.policy == EpochPolicy::kRepeat) {
      weights.push_back(static_cast<uint64_t>(s.repeat) *
                        static_cast<uint64_t>(s.num_samples));
    } else {
      weights.push_back(s.weight);
    }
  }
  STOKER_ASSIGN_OR_RETURN(WeightedInterleave interleave,
                          WeightedInterleave::Make(weights));
  EpochPlan plan(config, epoch, std::move(interleave));
  switch (config.policy) {
    case EpochPolicy::kFirstExhausted:
      plan.epoch_samples_ = FirstExhaustedLength(config.sources, weights);
      break;
    case EpochPolicy::kFixedSamples:
      plan.epoch_samples_ = config.samples_per_epoch;
      break;
    case EpochPolicy::kRepeat:
      plan.epoch_samples_ = 0;
      for (uint64_t w : weights) plan.epoch_samples_ += static_cast<int64_t>(w);
      break;
  }
  plan.global_batch_ = config.batch_size * config.world_size;
  const int64_t full = plan.epoch_samples_ / plan.global_batch_;
  const int64_t rest = plan.epoch_samples_ % plan.global_batch_;
  const bool keep_rest = rest > 0 && !config.drop_last && rest >= config.world_size;
  plan.num_batches_ = full + (keep_rest ? 1 : 0);
  plan.dropped_tail_ = keep_rest ? 0 : rest;
  return plan;
}

SampleRef EpochPlan::Resolve(int source, int64_t draw) const {
  const int64_t n = config_.sources[source].num_samples;
  const int64_t pass = draw / n;
  const int64_t j = draw % n;
  if (!config_.shuffle) return {source, j};
  uint64_t key = HashCombine(config_.seed, kShuffleTag);
  key = HashCombine(key, static_cast<uint64_t>(epoch_));
  key = HashCombine(key, static_cast<uint64_t>(source));
  key = HashCombine(key, static_cast<uint64_t>(pass));
  return {source, static_cast<int64_t>(Permutation(static_cast<uint64_t>(n), key)(
                      static_cast<uint64_t>(j)))};
}

void EpochPlan::Positions(int64_t begin, int64_t end, std::vector<SampleRef>* out) const {
  out->clear();
  if (begin >= end) return;
  out->reserve(static_cast<size_t>(end - begin));
  std::vector<int64_t> counts = interleave_.At(begin);
  for (int64_t p = begin; p < end; ++p) {
    const int source = interleave_.Next(counts);
    out->push_back(Resolve(source, counts[source] - 1));
  }
}

void EpochPlan::GlobalBatch(int64_t k, std::vector<SampleRef>* out) const {
  const int64_t begin = k * global_batch_;
  Positions(begin, std::min(begin + global_batch_, epoch_samples_), out);
}

void EpochPlan::RankBatch(int64_t k, std::vector<SampleRef>* out) const {
  const int64_t begin = k * global_batch_;
  const int64_t size = std::min(global_batch_, epoch_samples_ - begin);
  const int64_t w = config_.world_size, r = config_.rank;
  int64_t offset, count;
  if (size == global_batch_) {
    offset = r * config_.batch_size;
    count = config_.batch_size;
  } else {  // the final partial batch: sizes differ by at most one between ranks
    const int64_t base = size / w, extra = size % w;
    offset = r * base + std::min(r, extra);
    count = base + (r < extra ? 1 : 0);
  }
  Positions(begin + offset, begin + offset + count, out);
}

SampleRef EpochPlan::Replacement(int64_t batch, int64_t slot, int attempt) const {
  uint64_t h = HashCombine(config_.seed, kReplacementTag);
  h = HashCombine(h, static_cast<uint64_t>(epoch_));
  h = HashCombine(h, static_cast<uint64_t>(batch));
  h = HashCombine(h, static_cast<uint64_t>(slot));
  h = HashCombine(h, static_cast<uint64_t>(attempt));
  u128 total = 0;
  for (uint64_t w : interleave_.weights()) total += w;
  u128 pick = static_cast<u128>(h) % total;
  int source = 0;
  while (pick >= interleave_.weights()[source]) {
    pick -= interleave_.weights()[source];
    ++source;
  }
  const uint64_t n = static_cast<uint64_t>(config_.sources[source].num_samples);
  return {source, static_cast<int64_t>(Mix64(h ^ kReplacementTag) % n)};
}

}  // namespace stoker::plan
