#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "stoker/plan/epoch_plan.h"
#include "stoker/plan/interleave.h"
#include "stoker/plan/permutation.h"

namespace stoker::plan {
namespace {

TEST(PermutationTest, IsABijectionForAnySize) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 64ull, 1000ull, 4097ull, 65536ull}) {
    Permutation perm(n, 12345 + n);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = perm(i);
      ASSERT_LT(v, n);
      ASSERT_FALSE(seen[v]) << "n=" << n << " i=" << i;
      seen[v] = true;
    }
  }
}

TEST(PermutationTest, KeyChangesTheOrderAndIsDeterministic) {
  Permutation a(1000, 1), b(1000, 1), c(1000, 2);
  int same = 0, fixed_points = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), b(i));
    same += a(i) == c(i);
    fixed_points += a(i) == i;
  }
  EXPECT_LT(same, 20);  // ~1 expected for independent permutations
  EXPECT_LT(fixed_points, 20);
}

TEST(WeightedInterleaveTest, RandomAccessEqualsSequentialGeneration) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<uint64_t> weights(n);
    for (auto& w : weights) w = 1 + rng() % (trial % 2 ? 10 : 1000000);
    auto interleave = *WeightedInterleave::Make(weights);
    std::vector<int64_t> counts(n, 0);
    for (int64_t t = 0; t < 3000; ++t) {
      if (t % 97 == 0 || t < 20) {
        ASSERT_EQ(interleave.At(t), counts) << "trial " << trial << " t " << t;
      }
      interleave.Next(counts);
    }
  }
}

TEST(WeightedInterleaveTest, CountsTrackWeightsWithinOneSample) {
  auto interleave = *WeightedInterleave::Make({3, 5, 2});  // 30% / 50% / 20%
  std::vector<int64_t> counts(3, 0);
  for (int64_t t = 1; t <= 100000; ++t) {
    interleave.Next(counts);
    for (int i = 0; i < 3; ++i) {
      const double ideal = t * (i == 0 ? 0.3 : i == 1 ? 0.5 : 0.2);
      ASSERT_LE(std::abs(counts[i] - ideal), 1.0) << "t=" << t << " source " << i;
    }
  }
}

TEST(WeightedInterleaveTest, RefusesBadWeights) {
  EXPECT_FALSE(WeightedInterleave::Make({}).ok());
  EXPECT_FALSE(WeightedInterleave::Make({1, 0}).ok());
}

PlanConfig OneSource(int64_t n, int64_t batch, bool shuffle = false) {
  PlanConfig c;
  c.sources = {{n, 1, 1}};
  c.batch_size = batch;
  c.shuffle = shuffle;
  c.seed = 99;
  return c;
}

std::vector<SampleRef> Epoch(const EpochPlan& plan) {
  std::vector<SampleRef> all, batch;
  for (int64_t k = 0; k < plan.num_batches(); ++k) {
    plan.RankBatch(k, &batch);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

TEST(EpochPlanTest, OneSourceWithoutShuffleIsTheManifestOrder) {
  auto plan = *EpochPlan::Make(OneSource(10, 4), 0);
  EXPECT_EQ(plan.num_batches(), 3);
  auto all = Epoch(plan);
  ASSERT_EQ(all.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(all[i].index, i);
}

TEST(EpochPlanTest, ShuffleVisitsEverySampleOnceAndDiffersByEpoch) {
  auto e0 = Epoch(*EpochPlan::Make(OneSource(1000, 7, true), 0));
  auto e1 = Epoch(*EpochPlan::Make(OneSource(1000, 7, true), 1));
  std::set<int64_t> seen;
  for (auto r : e0) seen.insert(r.index);
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e0, Epoch(*EpochPlan::Make(OneSource(1000, 7, true), 0)));
}

TEST(EpochPlanTest, RepeatPolicyDrawsEachSampleExactlyRepeatTimes) {
  PlanConfig c;
  c.sources = {{50, 1, 3}, {7, 1, 1}, {20, 1, 2}};
  c.policy = EpochPolicy::kRepeat;
  c.shuffle = true;
  c.batch_size = 4;
  auto plan = *EpochPlan::Make(c, 2);
  EXPECT_EQ(plan.epoch_samples(), 150 + 7 + 40);
  std::map<std::pair<int, int64_t>, int> counts;
  std::vector<SampleRef> batch;
  for (int64_t k = 0; k < plan.num_batches(); ++k) {
    plan.GlobalBatch(k, &batch);
    for (auto r : batch) ++counts[{r.source, r.index}];
  }
  EXPECT_EQ(counts.size(), 50u + 7u + 20u);
  for (auto& [key, n] : counts) {
    EXPECT_EQ(n, key.first == 0 ? 3 : key.first == 1 ? 1 : 2);
  }
}

TEST(EpochPlanTest, FirstExhaustedStopsWhenASourceRunsOut) {
  PlanConfig c;
  c.sources = {{100, 1, 1}, {10, 1, 1}};  // equal weights: source 1 runs out first
  c.batch_size = 1;
  auto plan = *EpochPlan::Make(c, 0);
  auto all = Epoch(plan);
  int from1 = 0;
  for (auto r : all) from1 += r.source == 1;
  EXPECT_EQ(from1, 10);
  EXPECT_EQ(all.back().source, 1) << "the epoch ends with the exhausting draw";
  EXPECT_EQ(plan.epoch_samples(), 20);
}

TEST(EpochPlanTest, FixedSamplesWrapsSourcesWithANewPermutationPerPass) {
  PlanConfig c = OneSource(10, 5, true);
  c.policy = EpochPolicy::kFixedSamples;
  c.samples_per_epoch = 30;
  auto all = Epoch(*EpochPlan::Make(c, 0));
  ASSERT_EQ(all.size(), 30u);
  for (int pass = 0; pass < 3; ++pass) {
    std::set<int64_t> seen;
    for (int i = 0; i < 10; ++i) seen.insert(all[pass * 10 + i].index);
    EXPECT_EQ(seen.size(), 10u) << "each pass is a permutation";
  }
}

TEST(EpochPlanTest, RanksShareTheGlobalStreamEvenly) {
  PlanConfig c;
  c.sources = {{103, 3, 1}, {57, 1, 1}};
  c.shuffle = true;
  c.batch_size = 4;
  c.policy = EpochPolicy::kFixedSamples;
  c.samples_per_epoch = 150;  // 150 = 9 * 16 + 6: a partial last global batch
  for (int world : {1, 2, 4}) {
    PlanConfig global = c;
    global.batch_size = c.batch_size * 4 / world;  // the same global batch of 16
    global.world_size = world;
    std::vector<EpochPlan> ranks;
    for (int r = 0; r < world; ++r) {
      global.rank = r;
      ranks.push_back(*EpochPlan::Make(global, 3));
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(ranks[r].num_batches(), ranks[0].num_batches());
    EXPECT_EQ(ranks[0].num_batches(), 10);
    for (int64_t k = 0; k < ranks[0].num_batches(); ++k) {
      std::vector<SampleRef> expect, got, slice;
      ranks[0].GlobalBatch(k, &expect);
      for (int r = 0; r < world; ++r) {
        ranks[r].RankBatch(k, &slice);
        got.insert(got.end(), slice.begin(), slice.end());
      }
      EXPECT_EQ(got, expect) << "world " << world << " batch " << k;
    }
  }
}

TEST(EpochPlanTest, TailSmallerThanWorldIsDroppedAndReported) {
  PlanConfig c = OneSource(10, 4);
  c.world_size = 4;  // global batch 16 > 10 samples, 10 >= 4 ranks: one partial batch
  EXPECT_EQ(EpochPlan::Make(c, 0)->num_batches(), 1);
  c.sources[0].num_samples = 19;  // 16 + 3 < 4 ranks: the 3 are dropped
  auto plan = *EpochPlan::Make(c, 0);
  EXPECT_EQ(plan.num_batches(), 1);
  EXPECT_EQ(plan.dropped_tail(), 3);
  c.drop_last = true;
  c.sources[0].num_samples = 30;
  EXPECT_EQ(EpochPlan::Make(c, 0)->num_batches(), 1);
}

TEST(EpochPlanTest, ReplacementsAreDeterministicAndWeighted) {
  PlanConfig c;
  c.sources = {{1000, 9, 1}, {1000, 1, 1}};
  auto plan = *EpochPlan::Make(c, 0);
  int from0 = 0;
  for (int i = 0; i < 10000; ++i) {
    SampleRef r = plan.Replacement(i, i % 7, i % 3);
    EXPECT_EQ(r, plan.Replacement(i, i % 7, i % 3));
    EXPECT_LT(r.index, 1000);
    from0 += r.source == 0;
  }
  EXPECT_NEAR(from0 / 10000.0, 0.9, 0.02);
}

TEST(EpochPlanTest, RefusesBadConfigurations) {
  PlanConfig c = OneSource(10, 4);
  c.rank = 1;
  EXPECT_EQ(EpochPlan::Make(c, 0).status().code(), StatusCode::kInvalidArgument);
  c = OneSource(0, 4);
  EXPECT_FALSE(EpochPlan::Make(c, 0).ok());
  c = OneSource(10, 0);
  EXPECT_FALSE(EpochPlan::Make(c, 0).ok());
  c = OneSource(10, 1);
  c.policy = EpochPolicy::kFixedSamples;
  EXPECT_FALSE(EpochPlan::Make(c, 0).ok());
}

}  // namespace
}  // namespace stoker::plan
