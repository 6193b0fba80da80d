#include "stoker/plan/batch_plan.h"

#include <gtest/gtest.h>

namespace stoker::plan {
namespace {

TEST(BatchPlanTest, CoversEverySampleOnceInOrder) {
  for (int64_t n : {0, 1, 7, 8, 9, 100}) {
    for (int64_t b : {1, 3, 8}) {
      BatchPlan plan = *BatchPlan::Make(n, b, false);
      int64_t next = 0;
      for (int64_t k = 0; k < plan.num_batches(); ++k) {
        SampleRange r = plan.Batch(k);
        EXPECT_EQ(r.begin, next);
        EXPECT_GT(r.size(), 0);
        EXPECT_LE(r.size(), b);
        next = r.end;
      }
      EXPECT_EQ(next, n) << n << " " << b;
    }
  }
}

TEST(BatchPlanTest, DropLastKeepsOnlyFullBatches) {
  BatchPlan plan = *BatchPlan::Make(10, 4, true);
  EXPECT_EQ(plan.num_batches(), 2);
  EXPECT_EQ(plan.Batch(1).size(), 4);
  EXPECT_EQ(BatchPlan::Make(10, 4, false)->num_batches(), 3);
}

TEST(BatchPlanTest, RejectsBadBatchSize) {
  EXPECT_EQ(BatchPlan::Make(10, 0, false).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker::plan
